package provider_test

import (
	"bufio"
	"context"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/provider"
)

// stripeMockVersion is read from the Makefile, the one place that pins it.
func stripeMockVersion(t *testing.T, root string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatalf("read the Makefile for STRIPE_MOCK_VERSION: %v", err)
	}
	m := regexp.MustCompile(`(?m)^STRIPE_MOCK_VERSION := (\S+)$`).FindSubmatch(b)
	if m == nil {
		t.Fatal("the Makefile has no STRIPE_MOCK_VERSION line")
	}
	return string(m[1])
}

var buildStripeMock sync.Mutex

// stripeMockBinary is .bin/stripe-mock at the top of the module, built with go
// install (through the module proxy) when it is missing, as `make tools` does.
func stripeMockBinary(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(root, ".bin", "stripe-mock")
	buildStripeMock.Lock()
	defer buildStripeMock.Unlock()
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	version := stripeMockVersion(t, root)
	cmd := exec.Command("go", "install", "github.com/stripe/stripe-mock@"+version)
	cmd.Env = append(os.Environ(), "GOBIN="+filepath.Dir(bin))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("stripe-mock is not in .bin/ and building it failed (run `make tools`): %v\n%s", err, out)
	}
	return bin
}

// startStripeMock runs Stripe's official API mock on a free loopback port and
// returns its URL. It checks request parameters as Stripe's API does and answers
// with fixture data: it keeps no state.
func startStripeMock(t *testing.T) string {
	t.Helper()
	cmd := exec.Command(stripeMockBinary(t), "-http-addr", "127.0.0.1:0", "-https-addr", "127.0.0.1:0")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatalf("start stripe-mock: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr := make(chan string, 1)
	go func() {
		listening := regexp.MustCompile(`Listening for HTTP at address: (\S+)`)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if m := listening.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
	}()
	select {
	case a := <-addr:
		return "http://" + a
	case <-time.After(30 * time.Second):
		t.Fatal("stripe-mock did not start listening within 30s")
	}
	return ""
}

func TestStripeEventsAgainstStripeMock(t *testing.T) {
	t.Parallel()
	url := startStripeMock(t)
	client := &http.Client{Timeout: 10 * time.Second}
	ctx := context.Background()
	since := time.Now().Add(-72 * time.Hour)

	t.Run("ParametersAreAcceptedAndTheListIsRead", func(t *testing.T) {
		s := provider.NewStripeEvents(url, "sk_test_123", []string{"checkout.session.completed", "checkout.session.expired"}, client)
		page, err := s.List(ctx, since, "")
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		if len(page.Items) == 0 {
			t.Fatal("stripe-mock's list came back empty")
		}
		for _, it := range page.Items {
			if !strings.HasPrefix(it.ID, "evt_") || it.Type == "" || it.OccurredAt.IsZero() || !strings.HasPrefix(string(it.Body), `{"api_version"`) {
				t.Errorf("item = %+v (body %.40s), want an event with id, type, time and its JSON", it, it.Body)
			}
		}
		// The fixture list says has_more false: this was the last page.
		if page.Next != "" {
			t.Errorf("next = %q after the last page", page.Next)
		}
	})
	t.Run("TheNextPageStartsAfterTheLastEvent", func(t *testing.T) {
		s := provider.NewStripeEvents(url, "sk_test_123", []string{"invoice.paid"}, client)
		if _, err := s.List(ctx, since, "0:evt_1Pgc76B7WZ01zgkWwyRHS12y"); err != nil {
			t.Fatalf("List with starting_after: %v", err)
		}
	})
	t.Run("MoreThanTwentyTypesGoTwentyAtATime", func(t *testing.T) {
		var types []string
		for i := range 25 {
			types = append(types, "type."+string(rune('a'+i)))
		}
		s := provider.NewStripeEvents(url, "sk_test_123", types, client)
		first, err := s.List(ctx, since, "")
		if err != nil {
			t.Fatalf("first group: %v", err)
		}
		if first.Next != "1:" {
			t.Fatalf("next = %q, want the second group of types", first.Next)
		}
		second, err := s.List(ctx, since, first.Next)
		if err != nil || second.Next != "" {
			t.Fatalf("second group: %v, next %q", err, second.Next)
		}
	})
	t.Run("AMissingKeyIsRefused", func(t *testing.T) {
		s := provider.NewStripeEvents(url, "", []string{"invoice.paid"}, client)
		_, err := s.List(ctx, since, "")
		var pe *ledger.ProviderError
		if !errors.As(err, &pe) || pe.Status != 401 || !strings.Contains(pe.Message, "Stripe refused the credentials (401)") {
			t.Fatalf("List without a key = %v, want a 401 ProviderError", err)
		}
	})
	t.Run("TheMockChecksParameters", func(t *testing.T) {
		// The same server refuses what Stripe would: the checks above mean something.
		req, _ := http.NewRequest(http.MethodGet, url+"/v1/events?created%5Bgte%5D=yesterday", nil)
		req.Header.Set("Authorization", "Bearer sk_test_123")
		res, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusBadRequest {
			t.Errorf("a bad created[gte] got %d, want 400", res.StatusCode)
		}
	})
}
