package hands

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"
)

// MaxOutput bounds each of an exec's stdout and stderr, and a Read.
const MaxOutput = 1 << 20

// MaxWrite bounds the content of one Write.
const MaxWrite = 8 << 20

// ExecResult is what a command in the container did.
type ExecResult struct {
	Exit   int    `json:"exit"`
	Stdout string `json:"stdout"`
	Stderr string `json:"stderr"`
}

// Exec runs argv in the root's container as ContainerUser in /workspace,
// after checking the runtime, the owner label and the generation. Each
// stream is cut at MaxOutput with a note. A cancelled ctx stops waiting;
// neither runtime can kill an exec, so the command may run on until the
// container stops.
func Exec(ctx context.Context, root string, argv []string) (ExecResult, error) {
	if len(argv) == 0 || argv[0] == "" {
		return ExecResult{}, errors.New("exec needs a command, e.g. [\"ls\", \"-l\"]")
	}
	for _, a := range argv {
		if strings.ContainsRune(a, 0) {
			return ExecResult{}, errors.New("exec arguments cannot contain NUL")
		}
	}
	eng, rec, err := openReady(ctx, root)
	if err != nil {
		return ExecResult{}, err
	}
	defer eng.Close()
	return eng.exec(ctx, rec.ContainerID, argv, nil)
}

// Read returns a file under /workspace of the root's container.
func Read(ctx context.Context, root, p string) (string, error) {
	if err := checkWorkspacePath(p); err != nil {
		return "", err
	}
	eng, rec, err := openReady(ctx, root)
	if err != nil {
		return "", err
	}
	defer eng.Close()
	res, cut, err := eng.execRaw(ctx, rec.ContainerID, []string{"cat", p}, nil)
	if err != nil {
		return "", err
	}
	if res.Exit != 0 {
		return "", fmt.Errorf("read %s: %s (exit %d)", p, clip(res.Stderr), res.Exit)
	}
	if cut {
		return "", fmt.Errorf("read %s: the file is larger than %d bytes; read it in parts with hands.exec (`head -c`, `tail -c`)", p, MaxOutput)
	}
	return res.Stdout, nil
}

// Write replaces a file under /workspace of the root's container with
// content, passed on stdin so it never meets a shell's parser.
func Write(ctx context.Context, root, p, content string) error {
	if err := checkWorkspacePath(p); err != nil {
		return err
	}
	if p == "/workspace" {
		return errors.New("write needs a file under /workspace, not /workspace itself")
	}
	if len(content) > MaxWrite {
		return fmt.Errorf("write %s: content is %d bytes, at most %d", p, len(content), MaxWrite)
	}
	eng, rec, err := openReady(ctx, root)
	if err != nil {
		return err
	}
	defer eng.Close()
	res, _, err := eng.execRaw(ctx, rec.ContainerID, []string{"sh", "-c", `cat > "$1"`, "sh", p}, strings.NewReader(content))
	if err != nil {
		return err
	}
	if res.Exit != 0 {
		return fmt.Errorf("write %s: %s (exit %d)", p, clip(res.Stderr), res.Exit)
	}
	return nil
}

// checkWorkspacePath accepts only clean absolute paths under /workspace.
// A symlink planted inside the workspace can still point elsewhere; the
// container's read-only root, dropped capabilities and uid bound what
// that reaches.
func checkWorkspacePath(p string) error {
	switch {
	case strings.ContainsRune(p, 0):
		return errors.New("path contains NUL")
	case len(p) > 4096:
		return errors.New("path is longer than 4096 bytes")
	case !path.IsAbs(p) || path.Clean(p) != p:
		return fmt.Errorf("path %q must be absolute and clean, e.g. /workspace/notes.txt", p)
	case p != "/workspace" && !strings.HasPrefix(p, "/workspace/"):
		return fmt.Errorf("path %q is outside /workspace", p)
	}
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			return fmt.Errorf("path %q contains a \"..\" element", p)
		}
	}
	return nil
}

// openReady opens the recorded runtime and checks that the root is ready
// and its container is the recorded one, running.
func openReady(ctx context.Context, root string) (*runtimeClient, SetupReceipt, error) {
	rec, err := ReadReceipt(root)
	if err != nil {
		return nil, rec, err
	}
	if rec.Phase != PhaseReady {
		return nil, rec, fmt.Errorf("hands root %s is at phase %s, not ready: see `warden hands status --root %s`", root, rec.Phase, root)
	}
	eng, err := openRuntime(ctx, rec.EngineSocket)
	if err != nil {
		return nil, rec, err
	}
	fail := func(err error) (*runtimeClient, SetupReceipt, error) {
		eng.Close()
		return nil, rec, err
	}
	if err := eng.checkIdentity(root, rec); err != nil {
		return fail(err)
	}
	o, _, err := eng.inspect(ctx, rec.ContainerID, rec.Owner, root)
	switch {
	case err != nil:
		return fail(err)
	case o.Missing || !o.LabelOK || o.StartedAt != rec.Generation || !o.Running:
		return fail(fmt.Errorf("the container of %s is not the one warden started, or not running (%s): see `warden hands status --root %s`", root, o.State, root))
	}
	return eng, rec, nil
}

// exec runs argv and cuts each stream with a note.
func (e *runtimeClient) exec(ctx context.Context, id string, argv []string, stdin io.Reader) (ExecResult, error) {
	res, _, err := e.execRaw(ctx, id, argv, stdin)
	return res, err
}

func (e *runtimeClient) execRaw(ctx context.Context, id string, argv []string, stdin io.Reader) (ExecResult, bool, error) {
	cr, err := e.cli.ExecCreate(ctx, id, client.ExecCreateOptions{User: ContainerUser, WorkingDir: "/workspace", Cmd: argv,
		AttachStdin: stdin != nil, AttachStdout: true, AttachStderr: true})
	if err != nil {
		return ExecResult{}, false, fmt.Errorf("exec: %w", err)
	}
	att, err := e.cli.ExecAttach(ctx, cr.ID, client.ExecAttachOptions{})
	if err != nil {
		return ExecResult{}, false, fmt.Errorf("exec: %w", err)
	}
	defer att.Close()
	stop := context.AfterFunc(ctx, att.Close)
	defer stop()
	if stdin != nil {
		go func() {
			io.Copy(att.Conn, stdin)
			att.CloseWrite()
		}()
	}
	var out, errb capped
	if _, err := stdcopy.StdCopy(&out, &errb, att.Reader); err != nil && ctx.Err() == nil {
		return ExecResult{}, false, fmt.Errorf("exec output: %w", err)
	}
	if ctx.Err() != nil {
		return ExecResult{}, false, fmt.Errorf("exec: %w", context.Cause(ctx))
	}
	// The stream ends a moment before the exit code is recorded.
	for i := 0; ; i++ {
		ins, err := e.cli.ExecInspect(ctx, cr.ID, client.ExecInspectOptions{})
		if err != nil {
			return ExecResult{}, false, fmt.Errorf("exec: %w", err)
		}
		if !ins.Running {
			return ExecResult{Exit: ins.ExitCode, Stdout: out.String(), Stderr: errb.String()}, out.dropped > 0, nil
		}
		if i == 250 {
			return ExecResult{}, false, errors.New("exec: the command closed its output but did not exit within 5s")
		}
		select {
		case <-ctx.Done():
			return ExecResult{}, false, fmt.Errorf("exec: %w", context.Cause(ctx))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// capped keeps the first MaxOutput bytes and counts the rest, so a chatty
// command cannot grow warden's memory.
type capped struct {
	buf     bytes.Buffer
	dropped int64
}

func (c *capped) Write(p []byte) (int, error) {
	room := MaxOutput - c.buf.Len()
	if room >= len(p) {
		c.buf.Write(p)
		return len(p), nil
	}
	if room > 0 {
		c.buf.Write(p[:room])
	}
	c.dropped += int64(len(p) - max(room, 0))
	return len(p), nil
}

func (c *capped) String() string {
	if c.dropped == 0 {
		return c.buf.String()
	}
	return c.buf.String() + fmt.Sprintf("\n[warden: output cut at %d bytes; %d more dropped]", MaxOutput, c.dropped)
}

func clip(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 512 {
		s = s[:512] + "…"
	}
	if s == "" {
		return "no error output"
	}
	return s
}
