// Package mcpgw is warden's MCP gateway: an MCP server (the official Go
// SDK) whose tools are the registered modules' hooks, each call gated by
// the engine (GateMCP: the client's policy, or an operator's decision) and
// run as a jailed hook. It talks to the engine only through engine.Facade,
// so `warden mcp serve` works the same whether it holds the data dir or is
// attached to the process that does.
package mcpgw

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/wardenhq/warden/engine"
	"github.com/wardenhq/warden/engine/termsafe"
)

// Options configure a Gateway.
type Options struct {
	Engine engine.Facade
	// Actor is who relays the calls (the serve's own local:<user>); the
	// receipts name the MCP client, and this as "via".
	Actor engine.Actor
	// TTL is how long a call waits for the operator (0: the engine's
	// default, 5m).
	TTL time.Duration
	// Tail is how many of the run's last stream lines a result carries
	// (0: 20).
	Tail int
	// Version is warden's version, told to the client.
	Version string
	// Logf, when set, is told what the gateway does (never on stdout:
	// that is the MCP transport).
	Logf func(format string, args ...any)
}

// Gateway is one MCP server over one engine.
type Gateway struct {
	opts    Options
	server  *mcp.Server
	session string

	mu    sync.Mutex
	tools map[string]*tool
	e     engine.Facade // the engine now (see SetEngine)
	swap  chan struct{} // closed and replaced by SetEngine
}

// New makes a gateway; Run serves it.
func New(opts Options) *Gateway {
	if opts.Tail <= 0 {
		opts.Tail = 20
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	var id [6]byte
	rand.Read(id[:])
	g := &Gateway{opts: opts, session: "mcp-" + hex.EncodeToString(id[:]), tools: map[string]*tool{}, e: opts.Engine, swap: make(chan struct{})}
	g.server = mcp.NewServer(&mcp.Implementation{Name: "warden", Title: "warden", Version: opts.Version},
		&mcp.ServerOptions{
			Instructions: "Tools run warden modules' hooks in a jail on the operator's host. Every call is shown to a warden operator, " +
				"who approves or denies it unless a rule already allows it; a refused call says why.",
			// Tools, and the notice when their list changes (module add
			// and remove): the SDK says so only when asked.
			Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}},
		})
	return g
}

// eng is the engine calls go to now.
func (g *Gateway) eng() engine.Facade {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.e
}

// SetEngine moves the gateway to another engine (the process it was
// attached to let go of the data dir, and this one attached to the next
// holder or took it over). Calls in flight on the old one end with its
// error; the session is recorded again on the new one.
func (g *Gateway) SetEngine(e engine.Facade) {
	g.mu.Lock()
	g.e = e
	close(g.swap)
	g.swap = make(chan struct{})
	g.mu.Unlock()
}

func (g *Gateway) swapped() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.swap
}

// Session is this serve's session id (every receipt carries it).
func (g *Gateway) Session() string { return g.session }

// Server is the MCP server (for tests that connect in memory).
func (g *Gateway) Server() *mcp.Server { return g.server }

// Sync brings the tool list in line with the registered modules; the SDK
// tells connected clients (notifications/tools/list_changed) when it
// changed.
func (g *Gateway) Sync() error {
	ms, err := g.eng().Modules()
	if err != nil {
		return err
	}
	now, err := toolsOf(ms)
	if err != nil {
		return err
	}
	g.mu.Lock()
	var gone []string
	var added []*tool
	for name := range g.tools {
		if now[name] == nil {
			gone = append(gone, name)
		}
	}
	for name, t := range now {
		if old := g.tools[name]; old == nil || old.print != t.print {
			added = append(added, t)
		}
	}
	g.tools = now
	g.mu.Unlock()
	if len(gone) > 0 {
		g.server.RemoveTools(gone...)
	}
	for _, t := range added {
		def := &mcp.Tool{Name: t.name, Description: t.desc, InputSchema: t.in}
		if t.out != nil {
			def.OutputSchema = t.out
		}
		g.server.AddTool(def, g.handler(t.name))
	}
	if len(gone)+len(added) > 0 {
		g.opts.Logf("mcp: tools: %d added or changed, %d removed", len(added), len(gone))
	}
	return nil
}

// Run serves the gateway on transport until the client goes away or ctx
// ends. The tool list follows module add and remove live.
func (g *Gateway) Run(ctx context.Context, transport mcp.Transport) error {
	if err := g.Sync(); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go g.watch(ctx)
	ss, err := g.server.Connect(ctx, transport, nil)
	if err != nil {
		return err
	}
	held := make(chan struct{})
	go func() {
		defer close(held)
		// The client is connected from now until the session ends; its
		// name is known once it has initialized (or at its first call).
		for ss.InitializeParams() == nil {
			select {
			case <-ctx.Done():
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
		ci := ss.InitializeParams().ClientInfo
		s := engine.MCPSession{ID: g.session, PID: os.Getpid()}
		if ci != nil {
			s.Name, s.Version = ci.Name, ci.Version
		}
		// Held on whichever engine is current, again after a swap.
		for ctx.Err() == nil {
			swap := g.swapped()
			if err := g.eng().HoldMCPSession(ctx, g.opts.Actor, s); err != nil && ctx.Err() == nil {
				g.opts.Logf("mcp: recording the session: %v", err)
			}
			select {
			case <-ctx.Done():
			case <-swap:
			}
		}
	}()
	err = ss.Wait()
	cancel()
	<-held
	return err
}

// watch re-reads the modules every PollEvery and re-syncs the tools
// when they changed (a module added, removed, or its manifest edited).
// It polls rather than following the engine's events: those carry every
// stream line of every run, and a gateway behind a chatty run would see a
// module change late.
func (g *Gateway) watch(ctx context.Context) {
	t := time.NewTicker(PollEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := g.Sync(); err != nil {
				g.opts.Logf("mcp: re-reading the modules: %v", err)
			}
		}
	}
}

// PollEvery is how often the gateway re-reads the registered modules.
var PollEvery = time.Second

func clientName(req *mcp.CallToolRequest) string {
	if req.Session != nil {
		if p := req.Session.InitializeParams(); p != nil && p.ClientInfo != nil && p.ClientInfo.Name != "" {
			return p.ClientInfo.Name
		}
	}
	return "unnamed"
}

// MaxArguments bounds a call's arguments (they are stored with its
// request and shown to the operator).
const MaxArguments = 256 << 10

// failed is an isError result carrying text.
func failed(text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}

// handler answers calls of one tool: check the arguments against the
// schema (nothing runs, nobody is asked, when they do not match), gate the
// call, run the hook, and answer with its outputs and its last lines.
func (g *Gateway) handler(name string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		g.mu.Lock()
		t := g.tools[name]
		g.mu.Unlock()
		if t == nil {
			return failed(fmt.Sprintf("tool %s is gone: its module was removed from warden", name)), nil
		}
		e, actor := g.eng(), g.opts.Actor
		call := engine.MCPCall{Client: clientName(req), Session: g.session, Tool: name, Arguments: req.Params.Arguments, TTL: g.opts.TTL}

		if n := len(req.Params.Arguments); n > MaxArguments {
			call.Arguments = nil // not stored: it is what is refused
			return g.invalid(call, fmt.Sprintf("the arguments are %d bytes; at most %d", n, MaxArguments)), nil
		}
		args := map[string]any{}
		if raw := req.Params.Arguments; len(raw) > 0 && string(raw) != "null" {
			if err := json.Unmarshal(raw, &args); err != nil {
				return g.invalid(call, "the arguments are not a JSON object: "+err.Error()), nil
			}
		}
		if err := t.resolved.Validate(args); err != nil {
			return g.invalid(call, err.Error()), nil
		}

		gate, err := e.GateMCP(ctx, actor, call)
		if err != nil {
			return failed("warden could not gate the call: " + err.Error()), nil
		}
		if !gate.Allowed {
			return failed(gate.Message), nil
		}
		call.Ticket = gate.Ticket
		if t.hands {
			return g.handsCall(ctx, call), nil
		}
		h, err := e.StartRun(actor, engine.RunRequest{Module: t.module, Hook: t.hook, Inputs: args, Client: call.Client, Session: g.session, Ticket: gate.Ticket})
		if err != nil {
			return failed(fmt.Sprintf("%s did not start: %v", name, err)), nil
		}
		stopProgress := g.progress(ctx, req, h.ID)
		select {
		case <-h.Done():
		case <-ctx.Done():
			// notifications/cancelled (or the client went away): the run
			// is cancelled, and its end receipted, before we answer.
			h.Cancel()
			<-h.Done()
		}
		stopProgress()
		return g.result(h.ID, name, h.Wait()), nil
	}
}

func (g *Gateway) invalid(call engine.MCPCall, why string) *mcp.CallToolResult {
	if err := g.eng().RefuseMCP(g.opts.Actor, call, why); err != nil {
		g.opts.Logf("mcp: receipting a refused call: %v", err)
	}
	return failed(fmt.Sprintf("invalid arguments for %s, nothing ran: %s", call.Tool, why))
}

// result is a run's outcome as a tool result.
func (g *Gateway) result(run, name string, o engine.Outcome) *mcp.CallToolResult {
	rec := o.Run
	head := fmt.Sprintf("run %s of %s/%s %s in %s", run, rec.Module, rec.Hook, rec.Status, o.Duration.Round(time.Millisecond))
	if rec.Error != "" {
		head += ": " + rec.Error
	}
	text := safe(head) // rec.Error may quote the hook
	if tail := g.tail(run); tail != "" {
		text += "\nlast lines:\n" + tail
	}
	res := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}
	if !o.OK() {
		res.IsError = true
		return res
	}
	if len(rec.Outputs) > 0 {
		var out map[string]any
		if json.Unmarshal(rec.Outputs, &out) == nil {
			res.StructuredContent = termsafe.Value(out)
		}
	}
	return res
}

// tail is the run's last lines, one per line, with control characters
// shown escaped (a client may print them to a terminal).
func (g *Gateway) tail(run string) string {
	meta, err := g.eng().StreamInfo(run)
	if err != nil || meta.Lines == 0 {
		return ""
	}
	lines, err := g.eng().StreamLinesBefore(run, meta.Lines, g.opts.Tail)
	if err != nil {
		return ""
	}
	var b strings.Builder
	for _, l := range lines {
		fmt.Fprintf(&b, "%s %s\n", l.Level, safe(l.Text))
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// safe is text a hook or a module author wrote, escaped by the one rule
// every terminal-bound text of warden's follows (engine/termsafe): a
// client may print it to a terminal, so no control, no bidi override or
// isolate, no zero-width or other format character reaches it raw.
// structuredContent is escaped by the same rule, string by string
// (termsafe.Value), line breaks kept: a client may print it too.
func safe(s string) string { return termsafe.String(s) }

// progress relays the run's latest stream line as
// notifications/progress, at most every 100 ms, while the call waits,
// when the client asked for progress.
func (g *Gateway) progress(ctx context.Context, req *mcp.CallToolRequest, run string) (stop func()) {
	token := req.Params.GetProgressToken()
	if token == nil || req.Session == nil {
		return func() {}
	}
	sub := g.eng().Subscribe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		var n float64
		var last string
		var sent time.Time
		flush := func() {
			if last == "" {
				return
			}
			n++
			req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: n, Message: last})
			last, sent = "", time.Now()
		}
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		evs := make(chan engine.Event, 64)
		go func() {
			defer close(evs)
			for {
				ev, err := sub.Next(ctx)
				if err != nil {
					return
				}
				evs <- ev
			}
		}()
		for {
			select {
			case ev, ok := <-evs:
				if !ok {
					flush()
					return
				}
				if ev.Kind == engine.EventLines && ev.Lines != nil && ev.Lines.Run == run && len(ev.Lines.Lines) > 0 {
					last = safe(ev.Lines.Lines[len(ev.Lines.Lines)-1].Text)
					if time.Since(sent) >= 100*time.Millisecond {
						flush()
					}
				}
			case <-tick.C:
				flush()
			}
		}
	}()
	return func() {
		sub.Close()
		<-done
	}
}
