package db_test

import (
	"context"
	"net/url"
	"testing"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/db/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// oncehook's connections run without Postgres's JIT unless the URL asks for it.
func TestOpenTurnsJITOff(t *testing.T) {
	_, dsn := dbtest.NewDSN(t)
	ctx := context.Background()
	on := dsn + " jit=on" // a keyword/value string, or a URL with or without its query
	if u, err := url.Parse(dsn); err == nil && u.Scheme != "" {
		q := u.Query()
		q.Set("jit", "on")
		u.RawQuery = q.Encode()
		on = u.String()
	}
	for _, c := range []struct{ dsn, want string }{{dsn, "off"}, {on, "on"}} {
		pool, err := db.Open(ctx, c.dsn, 1)
		if err != nil {
			t.Fatal(err)
		}
		var jit string
		err = pool.QueryRow(ctx, `SHOW jit`).Scan(&jit)
		pool.Close()
		if err != nil {
			t.Fatal(err)
		}
		if jit != c.want {
			t.Errorf("%s: jit is %s, want %s", c.dsn, jit, c.want)
		}
	}
}
