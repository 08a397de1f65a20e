// Package deploy_test checks what deploy/ ships: the container image built and run
// with the machine's podman, the compose file, against the real binary's commands.
package deploy_test

import (
	"testing"

	"github.com/oncehook/oncehook/db/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// exampleEnv holds one value per variable examples/oncehook.example.yaml names.
var exampleEnv = map[string]string{
	"STRIPE_WEBHOOK_SECRET":   "whsec_c3RyaXBlLXNlY3JldA==",
	"GITHUB_WEBHOOK_SECRET":   "gh-secret-3",
	"SHOPIFY_WEBHOOK_SECRET":  "shpss-secret-4",
	"STANDARD_WEBHOOK_SECRET": "whsec_c3RhbmRhcmQtc2VjcmV0LTU=",
	"CRM_TOKEN":               "crm-token-6",
}
