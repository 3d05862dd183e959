package main

import (
	"maps"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/fraudwatch/fraudwatch/config"
)

// What reaches fraudwatch's pods in Kubernetes, and what they reach: the
// base's NetworkPolicy, and the slack-interactions component's listener,
// Service, Ingress and NetworkPolicy. Each port and selector is checked
// against the Deployment and the configuration it runs with, so that a
// port or label changed on one side fails here.

// labelSelector is a Kubernetes label selector.
type labelSelector struct {
	MatchLabels      map[string]string `yaml:"matchLabels"`
	MatchExpressions []struct {
		Key, Operator string
		Values        []string
	} `yaml:"matchExpressions"`
}

func (s *labelSelector) empty() bool {
	return s == nil || len(s.MatchLabels) == 0 && len(s.MatchExpressions) == 0
}

// policyPeer is a NetworkPolicy's from or to.
type policyPeer struct {
	NamespaceSelector *labelSelector `yaml:"namespaceSelector"`
	PodSelector       *labelSelector `yaml:"podSelector"`
	IPBlock           *struct {
		CIDR   string
		Except []string
	} `yaml:"ipBlock"`
}

// policyPort is a NetworkPolicy's port: a number, or a container port's name.
type policyPort struct {
	Port     string
	Protocol string
}

// policyRule is an ingress rule (From) or an egress rule (To).
type policyRule struct {
	From, To []policyPeer
	Ports    []policyPort
}

// networkPolicy is the part of a NetworkPolicy's spec the checks read.
type networkPolicy struct {
	PodSelector     labelSelector `yaml:"podSelector"`
	PolicyTypes     []string      `yaml:"policyTypes"`
	Ingress, Egress []policyRule
}

func decodePolicy(t *testing.T, m manifest) networkPolicy {
	t.Helper()
	var np networkPolicy
	if err := m.Spec.Decode(&np); err != nil {
		t.Fatalf("%s: %v", m.File, err)
	}
	return np
}

// containerPorts are the container's ports by name.
func containerPorts(d deployment) map[string]int {
	out := map[string]int{}
	for _, p := range d.Template.Spec.Containers[0].Ports {
		out[p.Name] = p.ContainerPort
	}
	return out
}

// resolvePort is the container port a port (a number, or a name) is, or 0
// when the container has none such.
func resolvePort(ports map[string]int, port string) int {
	if n, err := strconv.Atoi(port); err == nil {
		if slices.Contains(slices.Collect(maps.Values(ports)), n) {
			return n
		}
		return 0
	}
	return ports[port]
}

// checkSelectsPods checks that a selector picks the Deployment's pods: a
// selector without labels would pick every pod of the namespace.
func checkSelectsPods(t *testing.T, what string, labels map[string]string, d deployment) {
	t.Helper()
	if len(labels) == 0 {
		t.Errorf("%s selects by no label", what)
	}
	for k, v := range labels {
		if d.Template.Metadata.Labels[k] != v {
			t.Errorf("%s selects %s=%s, which the pods lack (%v)", what, k, v, d.Template.Metadata.Labels)
		}
	}
}

// checkPolicy checks what every NetworkPolicy here must hold: it selects
// the pods; each peer names whom it admits (an empty peer admits all); and
// a peer's pod selector has no matchLabels, which kustomize's labels
// (includeSelectors) would rewrite into fraudwatch's own label.
func checkPolicy(t *testing.T, m manifest, np networkPolicy, d deployment) {
	t.Helper()
	checkSelectsPods(t, m.File+": the NetworkPolicy", np.PodSelector.MatchLabels, d)
	for _, r := range slices.Concat(np.Ingress, np.Egress) {
		peers := slices.Concat(r.From, r.To)
		if len(peers) == 0 || len(r.Ports) == 0 {
			t.Errorf("%s: a rule %+v without peers or ports admits everyone or every port", m.File, r)
		}
		for _, p := range peers {
			if p.NamespaceSelector.empty() && p.PodSelector.empty() && p.IPBlock == nil {
				t.Errorf("%s: a peer %+v that admits everyone", m.File, p)
			}
			if p.PodSelector != nil && len(p.PodSelector.MatchLabels) > 0 {
				t.Errorf("%s: a peer's podSelector has matchLabels %v, which kustomize's labels rewrite to fraudwatch's: use matchExpressions",
					m.File, p.PodSelector.MatchLabels)
			}
		}
	}
}

// checkIngressPorts checks that a NetworkPolicy admits, on the container's
// ports, exactly want, each from peers in a namespace it names.
func checkIngressPorts(t *testing.T, m manifest, np networkPolicy, ports map[string]int, want ...int) {
	t.Helper()
	var got []int
	for _, r := range np.Ingress {
		for _, p := range r.Ports {
			n := resolvePort(ports, p.Port)
			if n == 0 {
				t.Errorf("%s: ingress on port %q, which the container does not have (%v)", m.File, p.Port, ports)
			}
			got = append(got, n)
		}
		for _, peer := range r.From {
			if peer.NamespaceSelector.empty() || peer.PodSelector.empty() {
				t.Errorf("%s: ingress from %+v: name the namespace and the pods", m.File, peer)
			}
		}
	}
	if slices.Sort(got); !slices.Equal(got, want) {
		t.Errorf("%s admits ingress on ports %v, want %v", m.File, got, want)
	}
}

// addrPorts are the ports of host:port addresses, and the namespace each
// host is a Service of ("svc.ns", "svc.ns.svc.cluster.local").
func addrPorts(t *testing.T, addrs []string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, a := range addrs {
		host, port, err := net.SplitHostPort(a)
		if err != nil {
			t.Fatalf("%q: %v", a, err)
		}
		labels := strings.Split(host, ".")
		if len(labels) < 2 {
			t.Fatalf("%q is not a Service of a namespace (svc.namespace)", a)
		}
		out[port+"/TCP"] = labels[1]
	}
	return out
}

// The base's NetworkPolicy: ingress on the metrics port alone (metrics.listen's
// port, the container's), from a namespace and pods it names; egress to
// DNS, to each Kafka broker's and Redis address's port in the namespace
// of its Service (the ConfigMap's kafka.brokers and redis.addrs), and to
// HTTPS, and nothing else.
func TestKubernetesNetworkPolicy(t *testing.T) {
	_, list := loadKustomization(t, kubeBase)
	objs := byKind(t, list)
	d := baseDeployment(t, objs)
	m := objs["NetworkPolicy"]
	np := decodePolicy(t, m)
	checkPolicy(t, m, np, d)
	if types := slices.Sorted(slices.Values(np.PolicyTypes)); !slices.Equal(types, []string{"Egress", "Ingress"}) {
		t.Errorf("%s: policyTypes %q, want Ingress and Egress", m.File, np.PolicyTypes)
	}
	cfg, err := config.Load(mountConfigMap(t, objs["ConfigMap"]))
	if err != nil {
		t.Fatal(err)
	}
	metrics := containerPorts(d)["metrics"]
	if _, port, _ := net.SplitHostPort(cfg.Metrics.Listen); port != strconv.Itoa(metrics) {
		t.Errorf("metrics.listen is %s, the container's metrics port %d", cfg.Metrics.Listen, metrics)
	}
	checkIngressPorts(t, m, np, containerPorts(d), metrics)

	// Where each egress port goes: a namespace, or "ipBlock".
	egress := map[string][]string{}
	for _, r := range np.Egress {
		for _, p := range r.Ports {
			key := p.Port + "/" + p.Protocol
			for _, peer := range r.To {
				to := "ipBlock"
				if peer.IPBlock == nil {
					to = peer.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"]
				}
				egress[key] = append(egress[key], to)
			}
		}
	}
	want := map[string]string{"53/UDP": "kube-system", "53/TCP": "kube-system", "443/TCP": "ipBlock"}
	for what, addrs := range map[string][]string{"kafka.brokers": cfg.Kafka.Brokers, "redis.addrs": cfg.Redis.Addrs} {
		for port, ns := range addrPorts(t, addrs) {
			if !slices.Contains(egress[port], ns) {
				t.Errorf("%s: no egress to %s in namespace %s, where %s %v are", m.File, port, ns, what, addrs)
			}
			want[port] = ns
		}
	}
	for port := range egress {
		if _, ok := want[port]; !ok {
			t.Errorf("%s: egress on %s, which fraudwatch does not use (%v)", m.File, port, want)
		}
	}
	for port, to := range want {
		if !slices.Contains(egress[port], to) {
			t.Errorf("%s: no egress on %s to %s", m.File, port, to)
		}
	}
}

// interactionsPatch is the component's patch of the base's Deployment.
func interactionsPatch(t *testing.T) deployment {
	t.Helper()
	var m manifest
	readYAML(t, filepath.Join(kubeInteractions, "deployment.yaml"), &m)
	var d deployment
	if err := m.Spec.Decode(&d); err != nil {
		t.Fatal(err)
	}
	if len(d.Template.Spec.Containers) != 1 {
		t.Fatalf("the component's patch has %d containers, want 1", len(d.Template.Spec.Containers))
	}
	return d
}

// interactionsHandlerPath is the path the listener serves, from the
// handler's registration in app/interactions.go.
func interactionsHandlerPath(t *testing.T) string {
	t.Helper()
	src, err := os.ReadFile("app/interactions.go")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`mux\.Handle\("POST (/\S+)"`).FindSubmatch(src)
	if m == nil {
		t.Fatal("app/interactions.go registers no POST handler")
	}
	return string(m[1])
}

// The slack-interactions component, as the base would take it: its patch
// targets the base's Deployment and container, and adds the interactions
// port, the listener on it (the configuration with the patch's variables,
// a token and a signing secret passes fraudwatch check, its
// slack.interactions_listen on that port, on every interface) and the
// signing secret, required; the Service selects the pods and targets that
// port; the Ingress serves the handler's path over TLS to the Service's
// port; the NetworkPolicy admits that port alone, from the ingress
// controller.
func TestKubernetesSlackInteractions(t *testing.T) {
	_, baseList := loadKustomization(t, kubeBase)
	baseObjs := byKind(t, baseList)
	d := baseDeployment(t, baseObjs)
	comp, list := loadKustomization(t, kubeInteractions)
	objs := byKind(t, list)

	var target manifest
	readYAML(t, filepath.Join(kubeInteractions, "deployment.yaml"), &target)
	patch := interactionsPatch(t)
	pc, c := patch.Template.Spec.Containers[0], d.Template.Spec.Containers[0]
	if len(comp.Patches) != 1 || comp.Patches[0].Path != "deployment.yaml" || comp.Patches[0].Target.Kind != "Deployment" ||
		comp.Patches[0].Target.Name != baseObjs["Deployment"].Metadata.Name || target.Metadata.Name != baseObjs["Deployment"].Metadata.Name ||
		pc.Name != c.Name {
		t.Fatalf("the component patches %+v (container %q), want deployment.yaml on the base's Deployment %s, container %q",
			comp.Patches, pc.Name, baseObjs["Deployment"].Metadata.Name, c.Name)
	}
	// The Deployment as patched: its ports and the patch's.
	ports := containerPorts(d)
	for _, p := range pc.Ports {
		if _, dup := ports[p.Name]; dup {
			t.Errorf("the patch's port %s is the base's already", p.Name)
		}
		ports[p.Name] = p.ContainerPort
	}
	port := ports["interactions"]
	if port == 0 || port == ports["metrics"] {
		t.Fatalf("the patched container's ports %v, want interactions apart from metrics", ports)
	}
	env := map[string]string{}
	for _, e := range pc.Env {
		switch ref := e.ValueFrom.SecretKeyRef; {
		case ref != nil && ref.Name == "fraudwatch-secrets" && !ref.Optional && e.Name == "FRAUDWATCH_SLACK_SIGNING_SECRET":
			env[e.Name] = "signing-secret-for-the-test"
		case ref == nil && e.Value != "":
			env[e.Name] = e.Value
		default:
			t.Errorf("the patch's %s: want a value, or the signing secret as a required key of fraudwatch-secrets", e.Name)
		}
	}
	checkInteractionsConfig(t, mountConfigMap(t, baseObjs["ConfigMap"]), env, port)

	var svc struct {
		Selector map[string]string
		Ports    []struct {
			Name       string
			Port       int
			TargetPort string `yaml:"targetPort"`
		}
	}
	svcObj := objs["Service"]
	if err := svcObj.Spec.Decode(&svc); err != nil {
		t.Fatal(err)
	}
	checkSelectsPods(t, "the interactions Service", svc.Selector, d)
	if len(svc.Ports) != 1 || resolvePort(ports, svc.Ports[0].TargetPort) != port {
		t.Fatalf("the interactions Service's ports %+v, want one to the container's port %d", svc.Ports, port)
	}
	checkIngress(t, objs["Ingress"], svcObj.Metadata.Name, svc.Ports[0].Name, svc.Ports[0].Port)

	m := objs["NetworkPolicy"]
	np := decodePolicy(t, m)
	checkPolicy(t, m, np, d)
	if !slices.Equal(np.PolicyTypes, []string{"Ingress"}) || len(np.Egress) > 0 {
		t.Errorf("%s: policyTypes %q, want Ingress alone: the base's policy holds the egress", m.File, np.PolicyTypes)
	}
	checkIngressPorts(t, m, np, ports, port)
}

// checkInteractionsConfig checks the ConfigMap's configuration with the
// patch's environment, a bot token and the signing secret: it passes
// fraudwatch check, and listens for Slack on every interface, on port.
func checkInteractionsConfig(t *testing.T, path string, env map[string]string, port int) {
	t.Helper()
	t.Setenv("FRAUDWATCH_SLACK_TOKEN", "xoxb-for-the-test")
	for k, v := range env {
		t.Setenv(k, v)
	}
	checkConfig(t, path)
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	host, p, err := net.SplitHostPort(cfg.Slack.InteractionsListen)
	if err != nil || !slices.Contains([]string{"", "0.0.0.0", "::"}, host) || p != strconv.Itoa(port) {
		t.Errorf("slack.interactions_listen is %q with the patch's environment, want \":%d\": the container's interactions port, on every interface",
			cfg.Slack.InteractionsListen, port)
	}
}

// checkIngress checks that the Ingress routes the handler's path, alone,
// over TLS for its host, to the Service's port (by name or number).
func checkIngress(t *testing.T, m manifest, service, portName string, port int) {
	t.Helper()
	var ing struct {
		TLS []struct {
			Hosts      []string
			SecretName string `yaml:"secretName"`
		}
		Rules []struct {
			Host string
			HTTP struct {
				Paths []struct {
					Path     string
					PathType string `yaml:"pathType"`
					Backend  struct {
						Service struct {
							Name string
							Port struct {
								Name   string
								Number int
							}
						}
					}
				}
			}
		}
	}
	if err := m.Spec.Decode(&ing); err != nil {
		t.Fatal(err)
	}
	want := interactionsHandlerPath(t)
	if len(ing.Rules) != 1 || len(ing.Rules[0].HTTP.Paths) != 1 {
		t.Fatalf("%s: rules %+v, want one host with one path, %s", m.File, ing.Rules, want)
	}
	r := ing.Rules[0]
	if len(ing.TLS) != 1 || ing.TLS[0].SecretName == "" || !slices.Contains(ing.TLS[0].Hosts, r.Host) {
		t.Errorf("%s: TLS %+v does not cover the host %q: Slack posts over HTTPS only", m.File, ing.TLS, r.Host)
	}
	p := r.HTTP.Paths[0]
	if p.Path != want || p.PathType != "Exact" {
		t.Errorf("%s: path %s (%s), want %s (Exact), the path the listener serves", m.File, p.Path, p.PathType, want)
	}
	b := p.Backend.Service
	if b.Name != service || (b.Port.Name != portName || portName == "") && b.Port.Number != port {
		t.Errorf("%s: backend %+v, want the Service %s's port %s (%d)", m.File, b, service, portName, port)
	}
}
