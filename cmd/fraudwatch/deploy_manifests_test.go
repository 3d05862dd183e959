package main

import (
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// deployment is the part of a Deployment's spec the checks read.
type deployment struct {
	Replicas int
	Template struct {
		Metadata struct{ Labels map[string]string }
		Spec     struct {
			SecurityContext struct {
				RunAsNonRoot bool `yaml:"runAsNonRoot"`
			} `yaml:"securityContext"`
			Volumes []struct {
				Name      string
				ConfigMap struct{ Name string } `yaml:"configMap"`
			}
			Containers []struct {
				Name  string
				Image string
				Args  []string
				Ports []struct {
					Name          string
					ContainerPort int `yaml:"containerPort"`
				}
				Env []struct {
					Name      string
					Value     string
					ValueFrom struct {
						SecretKeyRef *struct {
							Name, Key string
							Optional  bool
						} `yaml:"secretKeyRef"`
					} `yaml:"valueFrom"`
				}
				LivenessProbe struct {
					HTTPGet struct{ Path, Port string } `yaml:"httpGet"`
				} `yaml:"livenessProbe"`
				ReadinessProbe struct {
					HTTPGet struct{ Path, Port string } `yaml:"httpGet"`
				} `yaml:"readinessProbe"`
				Resources       struct{ Requests, Limits map[string]string }
				SecurityContext struct {
					ReadOnlyRootFilesystem   bool  `yaml:"readOnlyRootFilesystem"`
					AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
					Capabilities             struct{ Drop []string }
				} `yaml:"securityContext"`
				VolumeMounts []struct {
					Name      string
					MountPath string `yaml:"mountPath"`
					SubPath   string `yaml:"subPath"`
				} `yaml:"volumeMounts"`
			}
		}
	}
}

// baseDeployment is the base's Deployment and its one container.
func baseDeployment(t *testing.T, objs map[string]manifest) deployment {
	t.Helper()
	var d deployment
	dep := objs["Deployment"]
	if err := dep.Spec.Decode(&d); err != nil {
		t.Fatal(err)
	}
	if len(d.Template.Spec.Containers) != 1 {
		t.Fatalf("the Deployment has %d containers, want 1", len(d.Template.Spec.Containers))
	}
	return d
}

// The base's objects: the ConfigMap's configuration and rules pass check as
// the pod mounts them; the Deployment runs 3 non-root replicas with a
// read-only root, probes on /healthz and /readyz, and resources; the PDB and
// Service select its pods and port.
func TestKubernetesManifests(t *testing.T) {
	kust, list := loadKustomization(t, kubeBase)
	objs := byKind(t, list)
	cm := objs["ConfigMap"]
	configPath := mountConfigMap(t, cm)
	checkConfig(t, configPath)
	checkMetricsListen(t, configPath)

	d := baseDeployment(t, objs)
	if d.Replicas != 3 || !d.Template.Spec.SecurityContext.RunAsNonRoot {
		t.Errorf("deployment: %d replicas, non-root %v", d.Replicas, d.Template.Spec.SecurityContext.RunAsNonRoot)
	}
	c := d.Template.Spec.Containers[0]
	if len(c.Args) != 3 || c.Args[0] != "run" || c.Args[2] != "/etc/fraudwatch/fraudwatch.yaml" {
		t.Errorf("args %q", c.Args)
	}
	if len(c.Ports) != 1 || c.Ports[0].Name != "metrics" || c.Ports[0].ContainerPort != 9464 {
		t.Errorf("ports %+v, want metrics on %s", c.Ports, metricsPort)
	}
	if c.LivenessProbe.HTTPGet.Path != "/healthz" || c.ReadinessProbe.HTTPGet.Path != "/readyz" ||
		c.LivenessProbe.HTTPGet.Port != "metrics" || c.ReadinessProbe.HTTPGet.Port != "metrics" {
		t.Errorf("probes %+v %+v", c.LivenessProbe, c.ReadinessProbe)
	}
	if c.Resources.Requests["cpu"] != "500m" || c.Resources.Requests["memory"] != "128Mi" || c.Resources.Limits["memory"] != "256Mi" {
		t.Errorf("resources %+v, want requests of 500m and 128Mi, a limit of 256Mi (docs/operations.md)", c.Resources)
	}
	if !c.SecurityContext.ReadOnlyRootFilesystem || c.SecurityContext.AllowPrivilegeEscalation == nil || *c.SecurityContext.AllowPrivilegeEscalation ||
		!slices.Equal(c.SecurityContext.Capabilities.Drop, []string{"ALL"}) {
		t.Errorf("container security %+v, want a read-only root, no privilege escalation, every capability dropped", c.SecurityContext)
	}
	// The ConfigMap mounted whole, as a directory, once: a file mounted
	// with subPath never sees an update, and the rules would not reload.
	configVolumes := map[string]bool{}
	for _, v := range d.Template.Spec.Volumes {
		configVolumes[v.Name] = v.ConfigMap.Name == cm.Metadata.Name
	}
	if len(c.VolumeMounts) != 1 || c.VolumeMounts[0].MountPath != "/etc/fraudwatch" || c.VolumeMounts[0].SubPath != "" ||
		!configVolumes[c.VolumeMounts[0].Name] {
		t.Errorf("mounts %+v, want the ConfigMap %s as the directory /etc/fraudwatch, without subPath", c.VolumeMounts, cm.Metadata.Name)
	}
	// The image kustomization.yaml sets is the container's.
	if len(kust.Images) != 1 || kust.Images[0].Name != c.Image {
		t.Errorf("kustomization sets images %+v, the container runs %q", kust.Images, c.Image)
	}
	podLabels := d.Template.Metadata.Labels
	// selects says whether a selector picks the pods: a selector without
	// labels would pick every pod of the namespace.
	selects := func(what string, labels map[string]string) {
		t.Helper()
		if len(labels) == 0 {
			t.Errorf("%s selects by no label", what)
		}
		for k, v := range labels {
			if podLabels[k] != v {
				t.Errorf("%s selects %s=%s, which the pods lack", what, k, v)
			}
		}
	}

	var sel struct {
		MaxUnavailable int `yaml:"maxUnavailable"`
		Selector       struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		}
	}
	pdb := objs["PodDisruptionBudget"]
	if err := pdb.Spec.Decode(&sel); err != nil {
		t.Fatal(err)
	}
	selects("PodDisruptionBudget", sel.Selector.MatchLabels)
	if sel.MaxUnavailable != 1 {
		t.Errorf("the PodDisruptionBudget lets %d replicas be unavailable, want 1", sel.MaxUnavailable)
	}
	var svc struct {
		Selector map[string]string
		Ports    []struct {
			Name       string
			TargetPort string `yaml:"targetPort"`
		}
	}
	svcObj := objs["Service"]
	if err := svcObj.Spec.Decode(&svc); err != nil {
		t.Fatal(err)
	}
	selects("Service", svc.Selector)
	if len(svc.Ports) != 1 || svc.Ports[0].Name != "metrics" || svc.Ports[0].TargetPort != "metrics" {
		t.Errorf("service ports %+v", svc.Ports)
	}
}

// mountConfigMap writes the ConfigMap's files into a directory, as the pod
// mounts them, and returns the path of its fraudwatch.yaml.
func mountConfigMap(t *testing.T, cm manifest) string {
	t.Helper()
	root := t.TempDir()
	for name, content := range cm.Data {
		if err := os.WriteFile(filepath.Join(root, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(root, "fraudwatch.yaml")
}

// The secrets, each by reference and optional, so that a Deployment without
// them starts with alerts to the log. The kubectl lines of docs/operations.md
// (Deploy) create only keys the Deployment reads (with the interactions
// component, its signing secret too), and show both of Slack's (a webhook
// URL or a bot token); the page names the variable each comes in as.
func TestKubernetesSecrets(t *testing.T) {
	_, list := loadKustomization(t, kubeBase)
	c := baseDeployment(t, byKind(t, list)).Template.Spec.Containers[0]
	secrets := map[string]string{}
	for _, e := range c.Env {
		if e.Name == "GOMEMLIMIT" {
			continue // a setting, not a secret (TestGOMEMLIMIT)
		}
		ref := e.ValueFrom.SecretKeyRef
		if e.Value != "" || ref == nil || ref.Name != "fraudwatch-secrets" || !ref.Optional {
			t.Errorf("env %s: want an optional key of the secret fraudwatch-secrets", e.Name)
			continue
		}
		secrets[e.Name] = ref.Key
	}
	want := map[string]string{
		"FRAUDWATCH_SLACK_WEBHOOK_URL":   "slack-webhook-url",
		"FRAUDWATCH_SLACK_TOKEN":         "slack-token",
		"FRAUDWATCH_KAFKA_SASL_PASSWORD": "kafka-sasl-password",
		"FRAUDWATCH_REDIS_PASSWORD":      "redis-password",
	}
	if !maps.Equal(secrets, want) {
		t.Errorf("secrets %v, want %v", secrets, want)
	}
	read := slices.Collect(maps.Values(secrets))
	for _, e := range interactionsPatch(t).Template.Spec.Containers[0].Env {
		if ref := e.ValueFrom.SecretKeyRef; ref != nil && ref.Name == "fraudwatch-secrets" {
			read = append(read, ref.Key)
		}
	}
	deploy := docSection(t, "docs/operations.md", "## Deploy")
	var created []string
	for _, line := range regexp.MustCompile(`create secret generic fraudwatch-secrets( --from-literal=\S+)+`).FindAllString(deploy, -1) {
		for _, m := range regexp.MustCompile(`--from-literal=([a-z-]+)=`).FindAllStringSubmatch(line, -1) {
			created = append(created, m[1])
		}
	}
	for _, key := range created {
		if !slices.Contains(read, key) {
			t.Errorf("docs/operations.md's kubectl line creates the key %s, which the Deployment does not read", key)
		}
	}
	for _, key := range []string{"slack-webhook-url", "slack-token"} {
		if !slices.Contains(created, key) {
			t.Errorf("docs/operations.md's kubectl lines %q do not show the key %s", created, key)
		}
	}
	_, comeIn, _ := strings.Cut(deploy, "Secrets come in as ")
	comeIn, _, _ = strings.Cut(comeIn, "(")
	for name := range secrets {
		if !strings.Contains(comeIn, "`"+name+"`") {
			t.Errorf("docs/operations.md's Deploy, \"Secrets come in as\", does not name %s", name)
		}
	}
}

// fraudwatch's memory figures live in docs/performance.md: a run's peaks in
// the table of The last run (make bench's own rows), the range over all runs
// in Sizing's RSS row. The manifest's limit stays above the highest of them,
// and deploy/ and docs/operations.md's Deploy give no figure of their own,
// only the manifest's request and limit.
func TestMemoryFigures(t *testing.T) {
	_, list := loadKustomization(t, kubeBase)
	res := baseDeployment(t, byKind(t, list)).Template.Spec.Containers[0].Resources
	mi := func(q string) int {
		n, err := strconv.Atoi(strings.TrimSuffix(q, "Mi"))
		if err != nil || !strings.HasSuffix(q, "Mi") {
			t.Fatalf("memory %q, want a figure in Mi", q)
		}
		return n
	}
	request, limit := mi(res.Requests["memory"]), mi(res.Limits["memory"])

	figure := regexp.MustCompile(`(\d+)(?:-(\d+))? MiB`)
	// The row's "measured here" cell: its last cell plans with the limit.
	var row string
	for line := range strings.SplitSeq(docSection(t, "docs/performance.md", "## Sizing"), "\n") {
		if cells := strings.Split(line, "|"); len(cells) > 3 && strings.TrimSpace(cells[1]) == "RSS per fraudwatch process" {
			row = cells[2]
		}
	}
	peak := 0
	for _, m := range figure.FindAllStringSubmatch(row, -1) {
		for _, n := range m[1:] {
			if v, err := strconv.Atoi(n); err == nil {
				peak = max(peak, v)
			}
		}
	}
	if peak == 0 {
		t.Fatalf("docs/performance.md's Sizing gives no peak RSS in MiB: %q", row)
	}
	if limit <= peak {
		t.Errorf("the Deployment's memory limit %d Mi is not above the peak RSS of %d MiB (docs/performance.md, Sizing)", limit, peak)
	}
	// The table's rows: fraudwatch's memory, the runs with more processes and
	// the fraudwatch core's; (e)'s RSS is Kafka Streams', not fraudwatch's.
	table := regexp.MustCompile(`peak RSS (\d+) MiB`).FindAllStringSubmatch(docSection(t, "docs/performance.md", "## The last run"), -1)
	if len(table) == 0 {
		t.Fatal("docs/performance.md's The last run gives no peak RSS in MiB")
	}
	for _, m := range table {
		if v, _ := strconv.Atoi(m[1]); limit <= v {
			t.Errorf("the Deployment's memory limit %d Mi is not above the peak RSS of %d MiB (docs/performance.md, The last run)", limit, v)
		}
	}

	allowed := []string{strconv.Itoa(request) + " MiB", strconv.Itoa(limit) + " MiB"}
	texts := map[string]string{"docs/operations.md's Deploy": docSection(t, "docs/operations.md", "## Deploy")}
	err := filepath.WalkDir(deployDir, func(path string, e os.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		texts[path] = string(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for where, text := range texts {
		for _, f := range figure.FindAllString(text, -1) {
			if !slices.Contains(allowed, f) {
				t.Errorf("%s gives %s: memory figures belong in docs/performance.md's Sizing; refer to it", where, f)
			}
		}
	}
}
