package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// deploy/kubernetes (docs/operations.md, Deploy): a base that needs nothing but
// Kubernetes, an overlay that adds the Prometheus Operator's objects, and a
// component, off by default, that exposes the Slack interactions listener.
var (
	kubeBase         = filepath.Join(deployDir, "kubernetes", "base")
	kubeOperator     = filepath.Join(deployDir, "kubernetes", "prometheus-operator")
	kubeInteractions = filepath.Join(deployDir, "kubernetes", "slack-interactions")
)

// builtinAPIs are the APIs of Kubernetes itself that the base and the
// component use: a cluster without any CRD serves them.
var builtinAPIs = []string{"v1", "apps/v1", "policy/v1", "networking.k8s.io/v1"}

// manifest is the part of a Kubernetes object the checks read.
type manifest struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string
	Metadata   struct {
		Name   string
		Labels map[string]string
	}
	Data map[string]string
	Spec yaml.Node
	File string `yaml:"-"` // the file it came from
}

// kustomization is the part of a kustomization.yaml the checks read.
type kustomization struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string
	Namespace  string
	Labels     []struct {
		Pairs            map[string]string
		IncludeSelectors bool `yaml:"includeSelectors"`
	}
	Resources  []string
	Components []string
	Patches    []struct {
		Path   string
		Target struct{ Kind, Name string }
	}
	Images []struct{ Name string }
}

// files are the files of its directory a kustomization names: its
// resources and its patches.
func (k kustomization) files() []string {
	out := slices.Clone(k.Resources)
	for _, p := range k.Patches {
		out = append(out, p.Path)
	}
	return out
}

// loadKustomization reads dir's kustomization and the objects of every
// resource it lists, a listed directory's (another kustomization's) too:
// each listed file must parse.
func loadKustomization(t *testing.T, dir string) (kustomization, []manifest) {
	t.Helper()
	var k kustomization
	readYAML(t, filepath.Join(dir, "kustomization.yaml"), &k)
	var objs []manifest
	for _, r := range k.Resources {
		path := filepath.Join(dir, r)
		st, err := os.Stat(path)
		if err != nil {
			t.Fatalf("%s lists %s: %v", dir, r, err)
		}
		if st.IsDir() {
			_, sub := loadKustomization(t, path)
			objs = append(objs, sub...)
			continue
		}
		dec := yaml.NewDecoder(mustOpen(t, path))
		for {
			var m manifest
			if err := dec.Decode(&m); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			if m.Kind == "" || m.APIVersion == "" {
				t.Errorf("%s: an object without kind or apiVersion", path)
			}
			m.File = path
			objs = append(objs, m)
		}
	}
	return k, objs
}

// byKind indexes objects by kind: these manifests hold one of each.
func byKind(t *testing.T, objs []manifest) map[string]manifest {
	t.Helper()
	out := map[string]manifest{}
	for _, m := range objs {
		if _, dup := out[m.Kind]; dup {
			t.Errorf("%s: a second %s", m.File, m.Kind)
		}
		out[m.Kind] = m
	}
	return out
}

// The layout: the base holds the six objects of Kubernetes's own APIs; the
// overlay is the base and exactly the ServiceMonitor and PrometheusRule, in
// the same namespace with the same labels; the interactions component is a
// kustomize Component of Kubernetes's own APIs, which the base names (in a
// comment: off by default); no manifest is left unlisted; and
// docs/operations.md (Deploy) says which to apply.
func TestKubernetesLayout(t *testing.T) {
	base, baseObjs := loadKustomization(t, kubeBase)
	kinds := slices.Sorted(maps.Keys(byKind(t, baseObjs)))
	if want := []string{"ConfigMap", "Deployment", "Namespace", "NetworkPolicy", "PodDisruptionBudget", "Service"}; !slices.Equal(kinds, want) {
		t.Errorf("the base holds %q, want %q", kinds, want)
	}
	comp, compObjs := loadKustomization(t, kubeInteractions)
	if comp.APIVersion != "kustomize.config.k8s.io/v1alpha1" || comp.Kind != "Component" {
		t.Errorf("slack-interactions is a %s %s, want a kustomize.config.k8s.io/v1alpha1 Component (added to a kustomization, not applied alone)", comp.APIVersion, comp.Kind)
	}
	if len(base.Components) > 0 {
		t.Errorf("the base's components %q: the interactions listener is exposed only when asked for", base.Components)
	}
	if text, err := os.ReadFile(filepath.Join(kubeBase, "kustomization.yaml")); err != nil || !strings.Contains(string(text), "#   - ../slack-interactions\n") {
		t.Errorf("the base's kustomization.yaml does not show the line that turns on ../slack-interactions (%v)", err)
	}
	for _, m := range append(slices.Clone(baseObjs), compObjs...) {
		if !slices.Contains(builtinAPIs, m.APIVersion) {
			t.Errorf("%s: %s is %s, not an API of Kubernetes itself (%q): it would need a CRD", m.File, m.Kind, m.APIVersion, builtinAPIs)
		}
	}

	op, opObjs := loadKustomization(t, kubeOperator)
	if !slices.Contains(op.Resources, "../base") {
		t.Errorf("the overlay's resources %q do not include ../base", op.Resources)
	}
	var own []string
	for _, m := range opObjs {
		if filepath.Dir(m.File) != kubeOperator {
			continue
		}
		own = append(own, m.Kind)
		if m.APIVersion != "monitoring.coreos.com/v1" {
			t.Errorf("%s: %s is %s, want the operator's monitoring.coreos.com/v1", m.File, m.Kind, m.APIVersion)
		}
	}
	if slices.Sort(own); !slices.Equal(own, []string{"PrometheusRule", "ServiceMonitor"}) || len(opObjs) != len(baseObjs)+len(own) {
		t.Errorf("the overlay adds %q to the base's %d objects (%d in all), want exactly the PrometheusRule and ServiceMonitor",
			own, len(baseObjs), len(opObjs))
	}
	// kustomize sets an overlay's namespace and labels on its own objects
	// only: without them the ServiceMonitor would land in the default
	// namespace.
	if b, o := mustJSON(t, base.Labels), mustJSON(t, op.Labels); op.Namespace != base.Namespace || b != o {
		t.Errorf("the overlay's namespace %q and labels %s differ from the base's %q and %s", op.Namespace, o, base.Namespace, b)
	}
	for dir, k := range map[string]kustomization{kubeBase: base, kubeOperator: op, kubeInteractions: comp} {
		files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if name := filepath.Base(f); name != "kustomization.yaml" && !slices.Contains(k.files(), name) {
				t.Errorf("%s is in no kustomization: nothing applies it", f)
			}
		}
	}
	if stray, _ := filepath.Glob(filepath.Join(deployDir, "kubernetes", "*.yaml")); len(stray) > 0 {
		t.Errorf("%q outside base, prometheus-operator and slack-interactions: nothing applies them", stray)
	}

	deploy := docSection(t, "docs/operations.md", "## Deploy")
	for _, want := range []string{"kubectl apply -k deploy/kubernetes/base", "kubectl apply -k deploy/kubernetes/prometheus-operator", "CRDs",
		"deploy/kubernetes/slack-interactions", "components:"} {
		if !strings.Contains(deploy, want) {
			t.Errorf("docs/operations.md's Deploy does not say %q", want)
		}
	}
	docs, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range append(docs, "../../README.md") {
		text, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range regexp.MustCompile(`deploy/kubernetes[\w/.-]*\w`).FindAllString(string(text), -1) {
			if _, err := os.Stat(filepath.Join("../..", p)); err != nil {
				t.Errorf("%s names %s: %v", filepath.Base(doc), p, err)
			}
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// docSection is the section of the document at path (from the
// repository's root) under heading (a whole line, such as "## Deploy"), up
// to the next heading of its level or above, outside code blocks.
func docSection(t *testing.T, path, heading string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("../..", path))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	start := slices.Index(lines, heading)
	if start < 0 {
		t.Fatalf("%s has no %q", path, heading)
	}
	level := strings.IndexByte(heading, ' ')
	fenced := false
	for i := start + 1; i < len(lines); i++ {
		if strings.HasPrefix(lines[i], "```") {
			fenced = !fenced
		}
		hashes, _, ok := strings.Cut(lines[i], " ")
		if !fenced && ok && hashes != "" && strings.Trim(hashes, "#") == "" && len(hashes) <= level {
			return strings.Join(lines[start:i], "\n")
		}
	}
	return strings.Join(lines[start:], "\n")
}

// The Prometheus Operator's objects: the ServiceMonitor selects the Service
// by the labels it carries and scrapes its port; the PrometheusRule holds
// deploy/prometheus's rules.
func TestKubernetesPrometheusOperator(t *testing.T) {
	k, objs := loadKustomization(t, kubeOperator)
	kinds := byKind(t, objs)
	// The Service's labels as applied: its own and the kustomization's.
	svcLabels := maps.Clone(kinds["Service"].Metadata.Labels)
	if svcLabels == nil {
		svcLabels = map[string]string{}
	}
	for _, l := range k.Labels {
		maps.Copy(svcLabels, l.Pairs)
	}
	var sm struct {
		Selector struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		}
		Endpoints []struct{ Port, Path string }
	}
	smObj := kinds["ServiceMonitor"]
	if err := smObj.Spec.Decode(&sm); err != nil {
		t.Fatal(err)
	}
	if len(sm.Selector.MatchLabels) == 0 {
		t.Error("the ServiceMonitor selects by no label")
	}
	for key, v := range sm.Selector.MatchLabels {
		if svcLabels[key] != v {
			t.Errorf("the ServiceMonitor selects %s=%s, which the Service lacks (%v)", key, v, svcLabels)
		}
	}
	if len(sm.Endpoints) != 1 || sm.Endpoints[0].Port != "metrics" || sm.Endpoints[0].Path != "/metrics" {
		t.Errorf("the ServiceMonitor scrapes %+v, want the Service's port metrics at /metrics", sm.Endpoints)
	}

	// Not a copy that drifted.
	var want, got any
	readYAML(t, filepath.Join(deployDir, "prometheus", "fraudwatch-rules.yml"), &want)
	pr := kinds["PrometheusRule"]
	if err := pr.Spec.Decode(&got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal([]byte(mustJSON(t, want)), []byte(mustJSON(t, got))) {
		t.Error("prometheusrule.yaml differs from deploy/prometheus/fraudwatch-rules.yml")
	}
}
