package engine

import (
	"fmt"
	"github.com/wardenhq/warden/engine/perms"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// checkNumbers reads the integers after prefix in a run's CHECK line.
func checkNumbers(b *testing.B, e *Engine, o Outcome, prefix string) []int64 {
	b.Helper()
	c := hasCheck(checks(b, e, o.Run.ID), prefix)
	if c == "" {
		b.Fatalf("no %q line: run %s %s\n%s", prefix, o.Run.Status, o.Run.Error, streamText(b, e, o.Run.ID))
	}
	var out []int64
	for _, f := range strings.Fields(strings.TrimPrefix(c, prefix)) {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			b.Fatalf("%q: %v", c, err)
		}
		out = append(out, n)
	}
	return out
}

// BenchmarkEgressDownload: 100 MiB over HTTPS from a jailed hook, through
// the egress proxy (the engine accepting on the jail's listener, relaying
// to the world) and, the baseline, with network: true (the host's
// network, direct). The two alternate in ABBA order in every iteration,
// so a load that comes and goes weighs on both alike. hookMB/s is the
// hook's own download time (jail start excluded); ratio is proxy over
// host (the goal: at least 0.7).
func BenchmarkEgressDownload(b *testing.B) {
	needJail(b)
	w := newTLSWorld(b)
	const size = 100 << 20
	e := egressEngine(b, w, true, map[string]string{
		"proxy": egressHook("bench-dl", fmt.Sprintf("https://bulk.test:%d/bulk?n=%d", w.port, size), "/module/ca.pem"),
		"host":  escapeYAML("egress", "bench-dl", fmt.Sprintf("https://127.0.0.1:%d/bulk?n=%d", w.port, size), "/module/ca.pem") + "    network: true\n",
	})
	// The host's network for the host hook by an exact rule, so the
	// policy's switch stays off and the proxied hook is decided by its list.
	hostNet, err := perms.NewOp("module:testmod", perms.OpNetwork, map[string]string{"module": "testmod"})
	if err != nil {
		b.Fatal(err)
	}
	p, _, _ := e.Policy("module:testmod")
	p.Network, p.NetworkAllow = false, []string{fmt.Sprintf("bulk.test:%d", w.port)}
	p.Rules = []Rule{{Operation: perms.OpNetwork, Digest: hostNet.Digest, Summary: "network"}}
	if _, err := e.SetPolicy(testActor, p, p.Revision); err != nil {
		b.Fatal(err)
	}
	us := map[string]int64{}
	b.SetBytes(2 * size)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		order := []string{"host", "proxy"}
		if i%2 == 1 {
			order = []string{"proxy", "host"}
		}
		for _, mode := range order {
			o, err := e.RunHook(testActor, RunRequest{Module: "testmod", Hook: mode, Jail: JailBwrap})
			if err != nil {
				b.Fatal(err)
			}
			if want := map[string]string{"host": "host", "proxy": "egress"}[mode]; o.Run.Network != want {
				b.Fatalf("run network %q, want %q", o.Run.Network, want)
			}
			got := checkNumbers(b, e, o, "dl ")
			if got[0] != size {
				b.Fatalf("downloaded %d bytes, want %d", got[0], size)
			}
			us[mode] += got[1]
		}
	}
	b.StopTimer()
	rate := func(m string) float64 { return float64(size) * float64(b.N) / (float64(us[m]) / 1e6) / 1e6 }
	b.ReportMetric(rate("host"), "hookMB/s-host")
	b.ReportMetric(rate("proxy"), "hookMB/s-proxy")
	b.ReportMetric(rate("proxy")/rate("host"), "ratio")
}

// BenchmarkEgressConnectSetup: connections one after another from a
// jailed hook, each timed from its dial until one ping/pong has crossed
// it: through the proxy to a name on the policy's list (bridge, Unix
// socket, engine decision, engine dial) and, the baseline, a direct
// connect with the host's network. Runs of the two alternate in ABBA
// order (rounds runs of n connections per mode in every iteration), so a
// load that comes and goes weighs on both alike. Every connection is one
// sample; the metrics are the medians and 90th percentiles of each mode
// over all samples, and their differences (µs-added is the goal's figure).
func BenchmarkEgressConnectSetup(b *testing.B) {
	needJail(b)
	w := newTLSWorld(b)
	const n, rounds = 100, 4
	port := strconv.Itoa(w.pong)
	e := egressEngine(b, w, true, map[string]string{
		"proxy":  egressHook("bench-setup", strconv.Itoa(n), "allowed.test", port, "proxy"),
		"direct": escapeYAML("egress", "bench-setup", strconv.Itoa(n), "127.0.0.1", port, "direct") + "    network: true\n",
	})
	// The host's network for the direct hook by an exact rule (as an
	// approve-always would add), so the policy's switch stays off and the
	// proxied hook is decided by its list.
	hostNet, err := perms.NewOp("module:testmod", perms.OpNetwork, map[string]string{"module": "testmod"})
	if err != nil {
		b.Fatal(err)
	}
	p, _, _ := e.Policy("module:testmod")
	p.NetworkAllow = []string{"allowed.test:" + port}
	p.Rules = []Rule{{Operation: perms.OpNetwork, Digest: hostNet.Digest, Summary: "network"}}
	if _, err := e.SetPolicy(testActor, p, p.Revision); err != nil {
		b.Fatal(err)
	}
	samples := map[string][]float64{}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for round := 0; round < rounds; round++ {
			order := []string{"direct", "proxy"}
			if round%2 == 1 {
				order = []string{"proxy", "direct"}
			}
			for _, mode := range order {
				o, err := e.RunHook(testActor, RunRequest{Module: "testmod", Hook: mode, Jail: JailBwrap})
				if err != nil {
					b.Fatal(err)
				}
				if want := map[string]string{"direct": "host", "proxy": "egress"}[mode]; o.Run.Network != want {
					b.Fatalf("run network %q, want %q", o.Run.Network, want)
				}
				got := checkNumbers(b, e, o, "setup ")
				if int(got[0]) != n || len(got) != n+1 {
					b.Fatalf("%s: %d samples, want %d", mode, len(got)-1, n)
				}
				for _, us := range got[1:] {
					samples[mode] = append(samples[mode], float64(us))
				}
			}
		}
	}
	b.StopTimer()
	q := func(mode string, f float64) float64 {
		s := slices.Clone(samples[mode])
		slices.Sort(s)
		return s[int(f*float64(len(s)-1))]
	}
	b.ReportMetric(q("direct", 0.5), "µs/conn-direct")
	b.ReportMetric(q("proxy", 0.5), "µs/conn-proxy")
	b.ReportMetric(q("direct", 0.9), "p90µs-direct")
	b.ReportMetric(q("proxy", 0.9), "p90µs-proxy")
	b.ReportMetric(q("proxy", 0.9)-q("direct", 0.9), "p90µs-added")
	b.ReportMetric(q("proxy", 0.5)-q("direct", 0.5), "µs-added")
}
