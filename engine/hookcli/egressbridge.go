package hookcli

import "github.com/wardenhq/warden/engine/egress/bridge"

// hookEgressBridgeCommand is `warden hook egress-bridge`: the jail's first
// program when a hook's network is a list of names. Operators never run
// it; the jail does, before the hook.
func (a *cli) hookEgressBridgeCommand() *Command {
	return &Command{
		Use:   "egress-bridge --socket PATH -- PROGRAM [ARG...]",
		Short: "Inside the jail: hand 127.0.0.1:3128 and :1080 to the run's egress proxy, then run the hook",
		Long: `Started by the jail, before the hook, when the hook's network is a list of
destinations. It opens listeners on 127.0.0.1:3128 (HTTP proxy: CONNECT and
absolute-form http:// requests) and 127.0.0.1:1080 (SOCKS5, remote names)
in the jail's own network, hands them to the run's proxy over its socket,
and then execs the hook, which finds HTTP_PROXY, HTTPS_PROXY and ALL_PROXY
pointing there. The engine accepts the hook's connections on them until
the run ends; no bridge process stays in the jail.`,
		Example: `  # what the jail runs for a hook with network: [api.github.com:443]
  warden hook egress-bridge --socket /run/warden/egress.sock -- /module/hooks/fetch.sh`,
		Hidden:  true,
		RawArgs: true,
		Run: func(args []string) error {
			for _, a := range args {
				if a == "--" {
					break
				}
				if a == "--help" || a == "-h" {
					return ErrHelp
				}
			}
			// On success BridgeMain execs the hook and never returns; it
			// has said what went wrong on stderr when it does.
			if code := bridge.Main(args); code != 0 {
				return &ExitError{Code: code}
			}
			return nil
		},
	}
}
