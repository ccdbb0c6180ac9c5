package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/wardenhq/warden/cmd/serve/control"
	"github.com/wardenhq/warden/cmd/serve/sshconsole"
	"github.com/wardenhq/warden/engine"
	"github.com/wardenhq/warden/engine/mcpconf"
)

func (a *app) doctorCommand() *cobra.Command {
	var bwrap, operators, engineSocket string
	var fl fleetJoin
	c := &cobra.Command{
		Use:   "doctor",
		Short: "Check the data dir, store, trust root and bubblewrap; exit 1 on any problem",
		Long: `doctor checks the data dir, the store and its receipt chain, the trust
root, bubblewrap and what the kernel gives the jail. With --engine-socket
it also checks the container engine there, as hands init would before it
creates anything: which engine it is (Docker or Podman), whether its init
binary exists (docker-init, or catatonit for Podman) and the API version.`,
		Example: `  warden doctor
  warden doctor --engine-socket /run/docker.sock
  warden doctor --engine-socket /run/podman/podman.sock --json`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := a.checkChosenDataDir(); err != nil {
				return err
			}
			var fromConfig settings
			set, err := loadSettings()
			if err != nil && bwrap == "" {
				return err
			}
			if bwrap == "" {
				bwrap = set.Bwrap
				if set.Bwrap != "" {
					fromConfig = set
				}
			}
			fl = fl.or(set.Fleet)
			if err := fl.check(); err != nil {
				return err
			}
			a.sayNewDataDir() // doctor creates the store: say so first
			rep := engine.Doctor(engine.DoctorOptions{DataDir: a.dataDir, BwrapPath: bwrap, EngineSocket: engineSocket, Ceiling: set.Limits,
				Attach: func(dir string) (engine.Facade, int, error) {
					c, err := control.Dial(dir)
					if err != nil {
						return nil, 0, err
					}
					return c, c.PID(), nil
				}})
			if fromConfig.Bwrap != "" {
				pointAtConfigBwrap(rep.Checks, fromConfig)
			}
			if operators != "" {
				rep.Checks = append(rep.Checks, operatorsChecks(operators)...)
			}
			rep.Checks = append(rep.Checks, mcpClientChecks()...)
			if fl.url != "" {
				rep.Checks = append(rep.Checks, fleetCheck(rep.DataDir, fl))
			}
			if a.json {
				a.emitJSON(rep)
			} else {
				tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
				for _, c := range rep.Checks {
					fmt.Fprintf(tw, "%s\t%s\t%s\n", safe(c.Status), safe(c.Name), safe(c.Detail))
					if c.Fix != "" {
						fmt.Fprintf(tw, "\t\tfix: %s\n", safe(c.Fix))
					}
				}
				tw.Flush()
			}
			if !rep.OK() {
				return &exitError{code: 1}
			}
			return nil
		},
	}
	c.Flags().StringVar(&operators, "operators", "", "also check an SSH operators file (the one `warden serve --operators` reads)")
	c.Flags().StringVar(&engineSocket, "engine-socket", "", "also check the Docker or Podman engine on this unix socket (which engine, its init binary, its API version)")
	fl.bind(c)
	c.Flags().StringVar(&bwrap, "bwrap", "", "bubblewrap binary to check (absolute; default: the config file's bwrap, else /usr/bin/bwrap)")
	return c
}

// operatorsChecks reports an operators file: one problem per malformed
// line, or ok. serve skips such a line and the others keep working, but
// doctor was asked about this file, so a bad line fails it (exit 1).
func operatorsChecks(path string) []engine.Check {
	problems := sshconsole.CheckOperatorsFile(path)
	if len(problems) == 0 {
		return []engine.Check{{Name: "operators file", Status: "ok", Detail: path + ": every line is well-formed"}}
	}
	out := make([]engine.Check, len(problems))
	for i, p := range problems {
		out[i] = engine.Check{Name: "operators file", Status: "problem", Detail: p,
			Fix: "edit that line to `operator|viewer ssh-ed25519 AAAA... name`, or remove it (it is skipped until then)"}
	}
	return out
}

// mcpClientChecks reports each MCP client whose usual config has a
// "warden" entry, and whether the binary it runs is admitted (a client
// would start whatever that path holds). Problems are warnings: warden
// itself works either way. A client whose config file does not exist is
// not installed (or never configured), which is no problem: when no
// client has a config, one quiet ok line says so.
func mcpClientChecks() []engine.Check {
	var out []engine.Check
	for _, name := range mcpconf.ClientNames() {
		cl := mcpconf.Clients[name]
		path, err := cl.DefaultPath()
		if err != nil {
			continue
		}
		if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		check := "mcp client " + name
		e, err := mcpconf.Find(cl, path, "warden")
		switch {
		case err != nil:
			out = append(out, engine.Check{Name: check, Status: "problem", Warning: true, Detail: "cannot read " + path + ": " + err.Error(),
				Fix: "fix the file, then `warden mcp install --client " + name + "`"})
		case e == nil:
			// Not configured for warden: nothing to report.
		default:
			if aerr := mcpconf.AdmitExecutable(e.Command); aerr != nil {
				out = append(out, engine.Check{Name: check, Status: "problem", Warning: true,
					Detail: fmt.Sprintf("%s runs %s, which is not admitted: %v", path, e.Command, aerr),
					Fix:    "`warden mcp install --client " + name + "` with an admitted warden binary (--warden PATH)"})
				continue
			}
			if cl.ApprovalMode != "" && e.ApprovalMode != cl.ApprovalMode {
				out = append(out, engine.Check{Name: check, Status: "problem", Warning: true,
					Detail: fmt.Sprintf("%s runs %s %v (admitted), but its entry lacks default_tools_approval_mode = %q: %s", path, e.Command, e.Args, cl.ApprovalMode, mcpconf.ApprovalWhy),
					Fix:    "`warden mcp install --client " + name + "` writes it"})
				continue
			}
			out = append(out, engine.Check{Name: check, Status: "ok", Detail: fmt.Sprintf("%s runs %s %v (admitted)", path, e.Command, e.Args)})
		}
	}
	if len(out) == 0 {
		out = append(out, engine.Check{Name: "mcp clients", Status: "ok",
			Detail: "none configured (warden mcp install --client " + strings.Join(mcpconf.ClientNames(), "|") + ")"})
	}
	return out
}

// pointAtConfigBwrap: when the bubblewrap doctor refused is the one the
// config file names, the fix is that line, not installing a package
// (bubblewrap may well be installed where the default looks).
func pointAtConfigBwrap(checks []engine.Check, set settings) {
	for i := range checks {
		c := &checks[i]
		if c.Name != "bubblewrap" || c.Status == "ok" {
			continue
		}
		c.Detail += fmt.Sprintf(" (set by %s line %d)", set.File, set.BwrapLine)
		c.Fix = fmt.Sprintf("edit %s line %d (bwrap: %s) to name an admitted bubblewrap, or remove the line to use /usr/bin/bwrap; then %s",
			set.File, set.BwrapLine, set.Bwrap, c.Fix)
		if strings.HasPrefix(c.Fix, "edit") && strings.HasSuffix(c.Fix, "; then apt-get install bubblewrap") {
			c.Fix = strings.TrimSuffix(c.Fix, "; then apt-get install bubblewrap")
		}
	}
}
