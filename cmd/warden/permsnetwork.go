package main

import (
	"fmt"
	"strings"

	"github.com/wardenhq/warden/engine"
)

// setPolicyNetwork reads --network: true, false, or a comma-separated
// list of destinations (the engine checks each; its error names the
// entry). A list replaces the policy's list and turns network true off.
func setPolicyNetwork(p *engine.Policy, v string) error {
	switch strings.TrimSpace(v) {
	case "true":
		p.Network = true
		return nil
	case "false", "none":
		p.Network, p.NetworkAllow = false, nil
		return nil
	}
	var list []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			list = append(list, s)
		}
	}
	if len(list) == 0 {
		return usageError{fmt.Errorf("--network %q: want true, false, or destinations like api.github.com:443,pypi.org", v)}
	}
	p.Network, p.NetworkAllow = false, list
	return nil
}

// policyNetwork is a policy's network in words.
func policyNetwork(p engine.Policy) string {
	switch {
	case p.Network:
		return "TRUE: the host's whole network (hooks with network: true share it; hooks with a list may reach every name)"
	case len(p.NetworkAllow) > 0:
		return fmt.Sprintf("%d destinations, through the egress proxy:", len(p.NetworkAllow))
	}
	return "false"
}

// printNetworkPlan is the network part of `warden hook plan`.
func (a *app) printNetworkPlan(hp *engine.HookPlan) {
	switch hp.NetworkMode {
	case "host":
		a.printf("\nnetwork: HOST (network: true, granted by policy module:%s): the hook shares the host's whole network, loopback and LAN included\n", safe(hp.Module))
	case "egress":
		a.printf("\nnetwork: egress proxy (the jail keeps its empty network namespace; HTTP_PROXY/HTTPS_PROXY 127.0.0.1:3128, ALL_PROXY socks5h 127.0.0.1:1080)\n")
		a.printf("  the hook declares: %s\n", destList(hp.Destinations))
		switch {
		case hp.PolicyAll:
			a.printf("  policy module:%s allows: every name (network: true), loopback/private/metadata addresses still refused\n", safe(hp.Module))
		case len(hp.PolicyNetwork) > 0:
			a.printf("  policy module:%s allows: %s\n", safe(hp.Module), destList(hp.PolicyNetwork))
		default:
			a.printf("  policy module:%s allows: nothing yet: each connection becomes a network.connect request\n", safe(hp.Module))
		}
	default:
		a.printf("\nnetwork: none (the jail has its own empty network namespace)\n")
	}
}

func destList(ds []string) string {
	if len(ds) == 0 {
		return "(none)"
	}
	return safe(strings.Join(ds, ", "))
}
