// Package helm_test renders deploy/helm/oncehook with Helm's own chart loader and
// engine and checks the manifests. It is a module of its own so that Helm's
// Kubernetes libraries stay out of oncehook's go.mod.
package helm_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"
)

// manifests are one rendering's objects, by kind.
type manifests struct {
	deployments map[string]*appsv1.Deployment // by component: serve, worker
	jobs        []*batchv1.Job
	configMaps  []*corev1.ConfigMap
	secrets     []*corev1.Secret
	services    []*corev1.Service
	pdbs        []*policyv1.PodDisruptionBudget
	monitors    []map[string]any // ServiceMonitor and PodMonitor
}

// render renders the chart with the values in file (none when ""), then overrides.
func render(t *testing.T, file string, overrides map[string]any) (manifests, chartutil.Values) {
	t.Helper()
	chrt, err := loader.Load("oncehook")
	if err != nil {
		t.Fatal(err)
	}
	vals := map[string]any{}
	if file != "" {
		if vals, err = chartutil.ReadValuesFile(file); err != nil {
			t.Fatal(err)
		}
	}
	vals = chartutil.CoalesceTables(overrides, vals)
	rv, err := chartutil.ToRenderValues(chrt, vals,
		chartutil.ReleaseOptions{Name: "oncehook", Namespace: "hooks", IsInstall: true}, chartutil.DefaultCapabilities)
	if err != nil {
		t.Fatal(err)
	}
	out, err := engine.Render(chrt, rv)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	m := manifests{deployments: map[string]*appsv1.Deployment{}}
	for name, text := range out {
		for _, doc := range strings.Split(text, "\n---") {
			decode(t, name, doc, &m)
		}
	}
	values, err := rv.Table("Values")
	if err != nil {
		t.Fatal(err)
	}
	return m, values
}

func decode(t *testing.T, name, doc string, m *manifests) {
	t.Helper()
	var head struct{ Kind string }
	if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
		t.Fatalf("%s: %v\n%s", name, err, doc)
	}
	strict := func(v any) {
		if err := yaml.UnmarshalStrict([]byte(doc), v); err != nil {
			t.Fatalf("%s: %v\n%s", name, err, doc)
		}
	}
	switch head.Kind {
	case "":
		if strings.TrimSpace(strings.ReplaceAll(doc, "---", "")) != "" && !strings.HasPrefix(strings.TrimSpace(doc), "#") {
			t.Fatalf("%s: a document without a kind:\n%s", name, doc)
		}
	case "Deployment":
		d := new(appsv1.Deployment)
		strict(d)
		m.deployments[d.Spec.Template.Labels["app.kubernetes.io/component"]] = d
	case "Job":
		j := new(batchv1.Job)
		strict(j)
		m.jobs = append(m.jobs, j)
	case "ConfigMap":
		c := new(corev1.ConfigMap)
		strict(c)
		m.configMaps = append(m.configMaps, c)
	case "Secret":
		s := new(corev1.Secret)
		strict(s)
		m.secrets = append(m.secrets, s)
	case "Service":
		s := new(corev1.Service)
		strict(s)
		m.services = append(m.services, s)
	case "PodDisruptionBudget":
		p := new(policyv1.PodDisruptionBudget)
		strict(p)
		m.pdbs = append(m.pdbs, p)
	case "ServiceMonitor", "PodMonitor":
		var v map[string]any
		strict(&v)
		m.monitors = append(m.monitors, v)
	default:
		t.Fatalf("%s: unexpected kind %s", name, head.Kind)
	}
}

// oncehookBinary builds the oncehook command from the repository, to check that the
// chart's commands, flags and configs are ones it accepts.
func oncehookBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "oncehook")
	build := exec.Command("go", "build", "-o", bin, "./cmd/oncehook")
	build.Dir = "../.."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build oncehook: %v\n%s", err, out)
	}
	return bin
}

// envNames returns the *_env fields' values in a config tree: the variables it names.
func envNames(v any) []string {
	var names []string
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if strings.HasSuffix(k, "_env") {
				switch x := x.(type) {
				case string:
					names = append(names, x)
				case []any:
					for _, s := range x {
						names = append(names, s.(string))
					}
				}
				continue
			}
			names = append(names, envNames(x)...)
		}
	case []any:
		for _, x := range v {
			names = append(names, envNames(x)...)
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
