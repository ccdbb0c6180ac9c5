package mcpgw

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"sync"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The stdio transport of the MCP SDK ends its session on the first line
// it cannot decode: one line of invalid UTF-8, `{not json}`, `[]`, an
// object as id or JSON nested 10,000 deep made `warden mcp serve` exit.
// The line guard stands in front of it. It reads the client's lines
// itself, answers each bad one with the JSON-RPC error the spec names
// (-32700 for a line that is not JSON, -32600 for JSON that is not one
// request), and passes on only lines that decode as one message. The
// session goes on.
//
// Invariants: a line reaches the SDK only if jsonrpc.DecodeMessage
// accepts it; no error answer echoes any of the client's bytes except
// an id that is a string or a number; at most maxLine bytes of one line
// are held at a time.

const (
	// maxLine is the longest line kept, the SDK's own default: a longer
	// one is answered -32600 and skipped to its newline.
	maxLine = mcp.DefaultMaxLineLength
	// maxDepth bounds how deeply a message may nest. MCP's own messages
	// nest a few levels; tool arguments a few more. Go's decoder stops at
	// 10,000, which ended the session.
	maxDepth = 128
)

// GuardedStdio is the stdio transport of `warden mcp serve`: the SDK's
// line transport behind the line guard. Error answers and the SDK's own
// writes share out, one whole line at a time.
func GuardedStdio(in io.ReadCloser, out io.WriteCloser) mcp.Transport {
	pr, pw := io.Pipe()
	w := &lineWriter{w: out}
	go func() {
		err := guardLines(in, pw, w)
		pw.CloseWithError(err) // nil: the SDK reads io.EOF, as from in itself
	}()
	return &mcp.IOTransport{Reader: closeBoth{pr, in}, Writer: w}
}

// guardLines copies in's good lines to good and answers the bad ones on
// answer, until in ends. It returns in's read error (nil at EOF).
func guardLines(in io.Reader, good io.Writer, answer io.Writer) error {
	r := bufio.NewReaderSize(in, 64*1024)
	var line []byte
	tooLong := false
	for {
		chunk, err := r.ReadSlice('\n')
		switch {
		case tooLong:
			// skipping the rest of a line already answered
		case len(line)+len(chunk) > maxLine:
			tooLong, line = true, line[:0]
			if _, werr := answer.Write(errorLine(nil, jsonrpc.CodeInvalidRequest, "line too long: a message is at most 16 MiB")); werr != nil {
				return werr
			}
		default:
			line = append(line, chunk...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if !tooLong && len(bytes.TrimSpace(line)) > 0 { // blank lines: skipped, as the SDK does
			if bad := checkLine(line); bad != nil {
				if _, werr := answer.Write(bad); werr != nil {
					return werr
				}
			} else if _, werr := good.Write(withNewline(line)); werr != nil {
				return werr
			}
		}
		line, tooLong = line[:0], false
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// checkLine returns nil for a line that is one JSON-RPC message, else
// the error line that answers it.
func checkLine(line []byte) []byte {
	msg := bytes.TrimSpace(line)
	switch {
	case !utf8.Valid(msg):
		return errorLine(nil, jsonrpc.CodeParseError, "parse error: the line is not valid UTF-8")
	case depth(msg) > maxDepth:
		return errorLine(nil, jsonrpc.CodeInvalidRequest, "invalid request: the message nests more than 128 levels")
	case !json.Valid(msg):
		return errorLine(nil, jsonrpc.CodeParseError, "parse error: the line is not JSON")
	case msg[0] == '[':
		// Batches left JSON-RPC in MCP 2025-06-18, and the SDK ends the
		// session on one for newer versions: answer it here instead.
		return errorLine(nil, jsonrpc.CodeInvalidRequest, "invalid request: batches are not supported; send one message per line")
	case msg[0] != '{':
		return errorLine(nil, jsonrpc.CodeInvalidRequest, "invalid request: a message is a JSON object")
	}
	m, err := jsonrpc.DecodeMessage(msg)
	if resp, ok := m.(*jsonrpc.Response); err == nil && ok && resp.Result == nil && resp.Error == nil {
		err = errors.New("neither a method nor a result") // the SDK takes it for an empty answer
	}
	if err != nil {
		return errorLine(requestID(msg), jsonrpc.CodeInvalidRequest,
			"invalid request: a message needs \"jsonrpc\": \"2.0\", a string or number id, and a method (or a result or error)")
	}
	return nil
}

// requestID is msg's id when it is a string or a number, so the client
// can match the error to its request; otherwise nil, the null id.
func requestID(msg []byte) any {
	var head struct {
		ID any `json:"id"`
	}
	if json.Unmarshal(msg, &head) != nil {
		return nil
	}
	switch head.ID.(type) {
	case string, float64:
		return head.ID
	}
	return nil
}

// depth is how deeply msg's arrays and objects nest, brackets inside
// strings not counted. It reads every byte once, so a deep line costs
// no more than a long one.
func depth(msg []byte) int {
	d, most := 0, 0
	inString, escaped := false, false
	for _, c := range msg {
		switch {
		case escaped:
			escaped = false
		case inString:
			if c == '\\' {
				escaped = true
			} else if c == '"' {
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			if d++; d > most {
				most = d
			}
		case c == '}' || c == ']':
			d--
		}
	}
	return most
}

// errorResponse is a JSON-RPC error answer. ID is nil (null, as the
// spec asks when the request's id cannot be read), a string or a number.
type errorResponse struct {
	JSONRPC string        `json:"jsonrpc"`
	ID      any           `json:"id"`
	Error   jsonrpc.Error `json:"error"`
}

// errorLine is one JSON-RPC error response, newline-terminated.
func errorLine(id any, code int64, message string) []byte {
	data, err := json.Marshal(errorResponse{JSONRPC: "2.0", ID: id, Error: jsonrpc.Error{Code: code, Message: message}})
	if err != nil { // cannot happen for these values; keep the answer well-formed anyway
		data = []byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"internal error"}}`)
	}
	return append(data, '\n')
}

func withNewline(line []byte) []byte {
	if len(line) > 0 && line[len(line)-1] == '\n' {
		return line
	}
	return append(line, '\n')
}

// lineWriter writes each call whole: the guard's answers and the SDK's
// messages are each one Write of one line, so they never interleave.
type lineWriter struct {
	mu sync.Mutex
	w  io.WriteCloser
}

func (l *lineWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (l *lineWriter) Close() error { return l.w.Close() }

// closeBoth closes the pipe the SDK reads and the client's stream behind
// it, so a session the SDK ends also stops the guard's read.
type closeBoth struct {
	*io.PipeReader
	in io.Closer
}

func (c closeBoth) Close() error {
	c.PipeReader.Close()
	return c.in.Close()
}
