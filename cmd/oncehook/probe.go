package main

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

const probeUsage = `Usage: oncehook probe [URL]

GETs URL (default http://127.0.0.1:8080/readyz, or that port from PORT) and exits
zero only on a 2xx answer within 5 s: a health check for images that have no curl
(compose's healthcheck). It reads no config and no database.
`

func runProbe(ctx context.Context, env *environment, args []string) error {
	fs := newFlags(env, "probe", probeUsage)
	if err := fs.Parse(args); err != nil {
		return err
	}
	url := fs.Arg(0)
	if url == "" {
		port := env.getenv("PORT")
		if port == "" {
			port = "8080"
		}
		url = "http://127.0.0.1:" + port + "/readyz"
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	res.Body.Close()
	if res.StatusCode < 200 || res.StatusCode > 299 {
		return fmt.Errorf("probe %s: %s", url, res.Status)
	}
	fmt.Fprintf(env.stdout, "%s: %s\n", url, res.Status)
	return nil
}
