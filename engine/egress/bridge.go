package egress

import (
	"strings"

	"github.com/wardenhq/warden/engine/egress/bridge"
)

// Where the bridge listens inside the jail, and what the hook is told.
const (
	HTTPAddr  = bridge.HTTPAddr
	SocksAddr = bridge.SocksAddr
)

// HookEnv is the environment a hook in egress mode gets: both spellings,
// since tools disagree on which they read. NO_PROXY is set empty so that
// an inherited value cannot route a name around the proxy (nothing is
// reachable around it anyway: the jail has no route).
func HookEnv() map[string]string {
	env := map[string]string{}
	for k, v := range map[string]string{
		"HTTP_PROXY":  "http://" + HTTPAddr,
		"HTTPS_PROXY": "http://" + HTTPAddr,
		"ALL_PROXY":   "socks5h://" + SocksAddr,
		"NO_PROXY":    "",
	} {
		env[k] = v
		env[strings.ToLower(k)] = v
	}
	return env
}

// BridgeUsage is the helper's usage line.
const BridgeUsage = bridge.Usage

// BridgeMain is `warden hook egress-bridge` (bridge.Main).
func BridgeMain(args []string) int { return bridge.Main(args) }
