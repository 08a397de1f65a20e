package helm_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chartutil"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

const (
	configPath  = "/etc/oncehook/oncehook.yaml"
	secretValue = "sentinel-secret-value-7f3a"
)

func TestChart(t *testing.T) {
	bin := oncehookBinary(t)
	cases := []struct {
		name, file string
		overrides  map[string]any
		monitors   int
	}{
		{"Default", "", map[string]any{"secret": map[string]any{"values": map[string]any{
			"DATABASE_URL": secretValue, "STRIPE_WEBHOOK_SECRET": "whsec_" + secretValue, "CRM_TOKEN": secretValue}}}, 0},
		{"Production", "production-values.yaml", nil, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, values := render(t, tc.file, tc.overrides)
			secretName := checkSecret(t, m, values)
			checkConfigMap(t, bin, m, secretName)
			checkMigrateJob(t, bin, m, secretName)
			for _, component := range []string{"serve", "worker"} {
				checkDeployment(t, bin, m, values, component, secretName)
			}
			checkServices(t, m)
			if len(m.monitors) != tc.monitors {
				t.Errorf("%d ServiceMonitor/PodMonitor, want %d", len(m.monitors), tc.monitors)
			}
		})
	}
}

// checkSecret returns the Secret's name every pod reads, and checks the chart's own
// Secret when it makes one.
func checkSecret(t *testing.T, m manifests, values chartutil.Values) string {
	t.Helper()
	name, _ := values.PathValue("secret.name")
	create, _ := values.PathValue("secret.create")
	if create == true {
		if len(m.secrets) != 1 {
			t.Fatalf("%d Secrets, want the chart's one", len(m.secrets))
		}
		s := m.secrets[0]
		if hook := s.Annotations["helm.sh/hook"]; hook != "pre-install,pre-upgrade" {
			t.Errorf("the Secret is not made before the migration Job: hook %q", hook)
		}
		if s.StringData["DATABASE_URL"] != secretValue {
			t.Errorf("the Secret lacks the given DATABASE_URL: %v", s.StringData)
		}
		return s.Name
	}
	if len(m.secrets) != 0 {
		t.Errorf("%d Secrets rendered though secret.create is false", len(m.secrets))
	}
	return name.(string)
}

// checkConfigMap checks that the config holds no secret, names every secret through a
// variable, and is one oncehook accepts.
func checkConfigMap(t *testing.T, bin string, m manifests, secretName string) {
	t.Helper()
	if len(m.configMaps) != 1 {
		t.Fatalf("%d ConfigMaps, want 1", len(m.configMaps))
	}
	text := m.configMaps[0].Data["oncehook.yaml"]
	if strings.Contains(text, secretValue) {
		t.Errorf("a secret value is in the ConfigMap:\n%s", text)
	}
	var cfg any
	if err := yaml.Unmarshal([]byte(text), &cfg); err != nil {
		t.Fatal(err)
	}
	for _, d := range m.deployments {
		refs := secretRefs(d.Spec.Template.Spec.Containers[0], secretName)
		for _, v := range append(envNames(cfg), "DATABASE_URL") {
			if !refs[v] {
				t.Errorf("%s: %s does not come from the Secret %s", d.Name, v, secretName)
			}
		}
	}
	out, err := exec.Command(bin, "check", "--skip-env", "--config", writeFile(t, "oncehook.yaml", text)).CombinedOutput()
	if err != nil {
		t.Errorf("oncehook check on the ConfigMap's config: %v\n%s", err, out)
	}
}

func checkMigrateJob(t *testing.T, bin string, m manifests, secretName string) {
	t.Helper()
	if len(m.jobs) != 1 {
		t.Fatalf("%d Jobs, want the migration Job", len(m.jobs))
	}
	j := m.jobs[0]
	if hook := j.Annotations["helm.sh/hook"]; hook != "pre-install,pre-upgrade" {
		t.Errorf("migration Job hook = %q, want pre-install,pre-upgrade", hook)
	}
	c := j.Spec.Template.Spec.Containers[0]
	if !slices.Equal(c.Args, []string{"migrate"}) || len(c.Command) != 0 {
		t.Errorf("migration Job runs %v %v, want the image's oncehook with [migrate]", c.Command, c.Args)
	}
	if !secretRefs(c, secretName)["DATABASE_URL"] {
		t.Errorf("migration Job has no DATABASE_URL from the Secret %s", secretName)
	}
	checkArgs(t, bin, c.Args)
}

func checkDeployment(t *testing.T, bin string, m manifests, values chartutil.Values, component, secretName string) {
	t.Helper()
	d := m.deployments[component]
	if d == nil {
		t.Fatalf("no %s Deployment", component)
	}
	replicas, _ := values.PathValue(component + ".replicas")
	if d.Spec.Replicas == nil || float64(*d.Spec.Replicas) != toFloat(replicas) {
		t.Errorf("%s replicas = %v, want %v", component, d.Spec.Replicas, replicas)
	}
	c := d.Spec.Template.Spec.Containers[0]
	resources, err := values.Table(component + ".resources")
	if err != nil {
		t.Fatal(err)
	}
	var want corev1.ResourceRequirements
	b, _ := yaml.Marshal(map[string]any(resources))
	if err := yaml.UnmarshalStrict(b, &want); err != nil {
		t.Fatal(err)
	}
	if len(want.Requests) == 0 {
		t.Fatalf("%s: no resource requests in the values; the comparison would be empty", component)
	}
	if !equality.Semantic.DeepEqual(want, c.Resources) {
		t.Errorf("%s resources = %+v, want %+v", component, c.Resources, want)
	}
	if len(c.Args) < 3 || c.Args[0] != component || !slices.Contains(c.Args, configPath) {
		t.Errorf("%s runs %v, want oncehook %s --config %s", component, c.Args, component, configPath)
	}
	checkArgs(t, bin, c.Args)
	if !mountsConfig(d, c) {
		t.Errorf("%s does not mount the ConfigMap at %s", component, configPath)
	}
	port := listenPort(c)
	for probe, want := range map[*corev1.Probe]string{c.LivenessProbe: "/healthz", c.ReadinessProbe: "/readyz"} {
		if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != want {
			t.Errorf("%s: a probe is %+v, want GET %s", component, probe, want)
			continue
		}
		if got := containerPort(c, probe.HTTPGet.Port); got != port {
			t.Errorf("%s: probe %s on port %d, but oncehook listens on %d", component, want, got, port)
		}
	}
	checkPDB(t, m, d)
}

// checkServices checks that a Service selects the servers and none the workers.
func checkServices(t *testing.T, m manifests) {
	t.Helper()
	served := map[string]bool{}
	for _, s := range m.services {
		sel := labels.SelectorFromSet(s.Spec.Selector)
		for component, d := range m.deployments {
			if sel.Matches(labels.Set(d.Spec.Template.Labels)) {
				served[component] = true
			}
		}
	}
	if !served["serve"] || served["worker"] {
		t.Errorf("Services select %v; want the servers and not the workers", served)
	}
}

func checkPDB(t *testing.T, m manifests, d *appsv1.Deployment) {
	t.Helper()
	for _, p := range m.pdbs {
		sel := labels.SelectorFromSet(p.Spec.Selector.MatchLabels)
		if sel.Matches(labels.Set(d.Spec.Template.Labels)) {
			return
		}
	}
	t.Errorf("no PodDisruptionBudget covers %s", d.Name)
}

// checkArgs runs oncehook ARGS --help: the command exists and takes those flags.
func checkArgs(t *testing.T, bin string, args []string) {
	t.Helper()
	out, err := exec.Command(bin, append(slices.Clone(args), "--help")...).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Usage: oncehook "+args[0]) {
		t.Errorf("oncehook %v is not a command it accepts: %v\n%s", args, err, out)
	}
}

func secretRefs(c corev1.Container, secretName string) map[string]bool {
	refs := map[string]bool{}
	for _, e := range c.Env {
		if r := e.ValueFrom; r != nil && r.SecretKeyRef != nil && r.SecretKeyRef.Name == secretName && r.SecretKeyRef.Key == e.Name {
			refs[e.Name] = true
		}
	}
	return refs
}

func mountsConfig(d *appsv1.Deployment, c corev1.Container) bool {
	for _, vm := range c.VolumeMounts {
		if !strings.HasPrefix(configPath, vm.MountPath+"/") {
			continue
		}
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.Name == vm.Name && v.ConfigMap != nil {
				return true
			}
		}
	}
	return false
}

// listenPort is where oncehook listens in c: --metrics for a worker, PORT for serve.
func listenPort(c corev1.Container) int32 {
	addr := ""
	if i := slices.Index(c.Args, "--metrics"); i >= 0 && i+1 < len(c.Args) {
		addr = c.Args[i+1]
	} else {
		for _, e := range c.Env {
			if e.Name == "PORT" {
				addr = ":" + e.Value
			}
		}
	}
	_, port, _ := strings.Cut(addr, ":")
	return intstr.Parse(port).IntVal
}

func containerPort(c corev1.Container, p intstr.IntOrString) int32 {
	if p.Type == intstr.Int {
		return p.IntVal
	}
	for _, cp := range c.Ports {
		if cp.Name == p.StrVal {
			return cp.ContainerPort
		}
	}
	return -1
}

func toFloat(v any) float64 {
	switch v := v.(type) {
	case float64:
		return v
	case int:
		return float64(v)
	case int64:
		return float64(v)
	}
	return -1
}
