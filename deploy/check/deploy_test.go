// Package check tests the deployment recipes in deploy/: the Kubernetes
// manifests decode strictly into the Kubernetes API types and say what
// the README promises, the ConfigMap's config is a valid wasmstream
// config, the Dockerfile builds with deploy/build-static.sh and runs as
// non-root, and the systemd unit passes systemd-analyze verify. It is a
// module of its own so that the main module does not depend on k8s.io.
// image_build.sh runs the Dockerfile's build step on this machine.
package check

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/wasmstream/wasmstream/scheduler/config"
)

// objects decodes every manifest of ../kubernetes strictly (an unknown or
// misspelt field is an error) into the type its kind names.
func objects(t *testing.T) map[string]any {
	t.Helper()
	files, _ := filepath.Glob("../kubernetes/*.yaml")
	examples, _ := filepath.Glob("../kubernetes/example/*.yaml")
	files = append(files, examples...)
	if len(files) == 0 {
		t.Fatal("no manifests")
	}
	out := map[string]any{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(b), -1) {
			if strings.TrimSpace(doc) == "" {
				continue
			}
			var tm metav1.TypeMeta
			if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			var obj any
			switch tm.APIVersion + "/" + tm.Kind {
			case "apps/v1/StatefulSet":
				obj = &appsv1.StatefulSet{}
			case "v1/ConfigMap":
				obj = &corev1.ConfigMap{}
			case "v1/Secret":
				obj = &corev1.Secret{}
			case "v1/Service":
				obj = &corev1.Service{}
			case "policy/v1/PodDisruptionBudget":
				obj = &policyv1.PodDisruptionBudget{}
			default:
				t.Fatalf("%s: unexpected kind %s %s", f, tm.APIVersion, tm.Kind)
			}
			if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
				t.Fatalf("%s: %s: %v", f, tm.Kind, err)
			}
			out[tm.Kind] = obj
		}
	}
	return out
}

func TestKubernetesManifests(t *testing.T) {
	objs := objects(t)
	ss, _ := objs["StatefulSet"].(*appsv1.StatefulSet)
	cm, _ := objs["ConfigMap"].(*corev1.ConfigMap)
	pdb, _ := objs["PodDisruptionBudget"].(*policyv1.PodDisruptionBudget)
	svc, _ := objs["Service"].(*corev1.Service)
	if ss == nil || cm == nil || pdb == nil || svc == nil || objs["Secret"] == nil {
		t.Fatalf("want a StatefulSet, ConfigMap, PodDisruptionBudget, Service and an example Secret: %v", objs)
	}
	pod := ss.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers", len(pod.Containers))
	}
	c := pod.Containers[0]
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}
	if e := env["WASMSTREAM_HOST_ID"]; e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != "metadata.name" {
		t.Error("host.id must come from the pod's name")
	}
	for _, name := range []string{"WASMSTREAM_ADMIN_TOKEN", "WASMSTREAM_KAFKA_SASL_PASSWORD"} {
		if e := env[name]; e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
			t.Errorf("%s must come from a Secret", name)
		}
	}
	probe := func(what string, p *corev1.Probe, path string) {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != path || p.HTTPGet.Port.String() != "metrics" {
			t.Errorf("%s probe: want GET %s on the metrics port", what, path)
		}
	}
	probe("liveness", c.LivenessProbe, "/healthz")
	probe("startup", c.StartupProbe, "/healthz")
	probe("readiness", c.ReadinessProbe, "/readyz")
	sc := c.SecurityContext
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Error("the container must have a read-only root filesystem and no privilege escalation")
	}
	if psc := pod.SecurityContext; psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0 {
		t.Error("the pod must run as non-root")
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Error("resources: want cpu and memory requests and a memory limit")
	}
	if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 {
		t.Error("the PodDisruptionBudget should allow one host down at a time")
	}
	labels := ss.Spec.Template.Labels
	for k, v := range pdb.Spec.Selector.MatchLabels {
		if labels[k] != v {
			t.Errorf("the PodDisruptionBudget's selector %s=%s does not select the pods", k, v)
		}
	}
	for k, v := range svc.Spec.Selector {
		if labels[k] != v {
			t.Errorf("the Service's selector %s=%s does not select the pods", k, v)
		}
	}
	if ss.Spec.ServiceName != svc.Name {
		t.Errorf("serviceName %q, the Service is %q", ss.Spec.ServiceName, svc.Name)
	}

	// Every writable path is on a volume; the config comes from the
	// ConfigMap, and is a config wasmstream loads.
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		mounts[m.MountPath] = m.Name
	}
	if mounts["/etc/wasmstream"] != "config" || mounts["/var/lib/wasmstream"] != "state" || mounts["/tmp"] == "" {
		t.Errorf("mounts %v", mounts)
	}
	// The modules are in the image (/opt/wasmstream/modules): here, in a
	// directory of the test's.
	dir := t.TempDir()
	text := strings.ReplaceAll(cm.Data["config.yaml"], "/opt/wasmstream/modules/", dir+"/")
	for _, m := range regexp.MustCompile(`module: (\S+)`).FindAllStringSubmatch(text, -1) {
		os.WriteFile(m[1], []byte("\x00asm\x01\x00\x00\x00"), 0o644)
	}
	path := filepath.Join(dir, "config.yaml")
	os.WriteFile(path, []byte(text), 0o644)
	cfg, err := config.Load(path, []string{"WASMSTREAM_HOST_ID=wasmstream-0"}, nil)
	if err != nil {
		t.Fatalf("the ConfigMap's config.yaml: %v", err)
	}
	if !strings.HasPrefix(cfg.Admin.StoreDir, "/var/lib/wasmstream/") || !strings.HasPrefix(cfg.Host.CompileCacheDir, "/var/lib/wasmstream/") || cfg.Host.ID != "wasmstream-0" {
		t.Errorf("store %q, compile cache %q, host.id %q: want the state volume and the pod's name", cfg.Admin.StoreDir, cfg.Host.CompileCacheDir, cfg.Host.ID)
	}
}

// The image is built with deploy/build-static.sh (what image_build.sh
// runs here) and runs as a non-root user, with its state on a volume.
func TestDockerfile(t *testing.T) {
	b, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	df := string(b)
	for _, want := range []string{"sh deploy/build-static.sh", "\nFROM gcr.io/distroless/static", "\nUSER 65532:65532", `VOLUME ["/var/lib/wasmstream"]`} {
		if !strings.Contains(df, want) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
	if strings.Count(df, "\nFROM ") != 2 {
		t.Error("want a two-stage build")
	}
}

// The unit passes systemd-analyze verify (with ExecStart on a binary that
// exists here).
func TestSystemdUnit(t *testing.T) {
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("no systemd-analyze")
	}
	b, err := os.ReadFile("../systemd/wasmstream.service")
	if err != nil {
		t.Fatal(err)
	}
	unit := filepath.Join(t.TempDir(), "wasmstream.service")
	os.WriteFile(unit, bytes.ReplaceAll(b, []byte("/usr/local/bin/wasmstream"), []byte("/bin/true")), 0o644)
	out, err := exec.Command(sa, "verify", unit).CombinedOutput()
	// verify may warn about the host it runs on (no D-Bus in a container);
	// what concerns the unit names it.
	if err != nil && bytes.Contains(out, []byte("wasmstream.service")) {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
	if bytes.Contains(out, []byte("wasmstream.service:")) {
		t.Fatalf("systemd-analyze verify:\n%s", out)
	}
	t.Logf("systemd-analyze verify: %v %s", err, out)
}

// The strict decode the manifests pass does refuse a misspelt field.
func TestStrictDecodeRefusesUnknownFields(t *testing.T) {
	if err := yaml.UnmarshalStrict([]byte("apiVersion: apps/v1\nkind: StatefulSet\nspec: {replicaz: 3}\n"), &appsv1.StatefulSet{}); err == nil {
		t.Fatal("a misspelt field decoded")
	}
}
