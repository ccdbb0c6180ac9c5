package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// Decode decodes one frame from line, with or without its trailing '\n'.
// Frames come back as pointers (*Hello, *Call, ...). Every failure is an
// *Error with code bad_frame whose message says what is wrong without
// echoing more than a few dozen bytes of the input.
//
// A hello with a protocol other than Version decodes: answering
// version_mismatch is the broker's job.
func Decode(line []byte) (Frame, error) {
	if f, ok := decodePlainLog(line); ok {
		return f, nil
	}
	return decode(line)
}

// decodePlainLog decodes the most common frame of all, a log line as
// AppendLog (and Encode) writes it, whose message needs no escape, in one
// pass, without the general walk's syntax check, member walk and
// unquoting (about three quarters of a log frame's cost in the broker).
// It accepts only lines the general decoder accepts, with the same
// result; anything else (another shape, an escape, a control character,
// an unknown level) is false, for the general decoder to judge.
func decodePlainLog(line []byte) (*Log, bool) {
	const pre, mid, end = `{"type":"log","level":"`, `","message":"`, `"}`
	rest, ok := bytes.CutPrefix(line, []byte(pre))
	if !ok {
		return nil, false
	}
	q := bytes.IndexByte(rest, '"')
	if q < 0 {
		return nil, false
	}
	level := string(rest[:q])
	if !oneOf(level, levels) {
		return nil, false
	}
	if rest, ok = bytes.CutPrefix(rest[q:], []byte(mid)); !ok {
		return nil, false
	}
	rest = bytes.TrimSuffix(rest, []byte("\n"))
	if rest, ok = bytes.CutSuffix(rest, []byte(end)); !ok {
		return nil, false
	}
	for _, c := range rest {
		if c < 0x20 || c == '"' || c == '\\' {
			return nil, false
		}
	}
	if !utf8.Valid(rest) {
		return nil, false
	}
	return &Log{Level: level, Message: string(rest)}, true
}

func decode(line []byte) (Frame, error) {
	if !utf8.Valid(line) {
		return nil, badf("frame", "not valid UTF-8")
	}
	// One full syntax check up front (it also refuses trailing data) lets
	// the member walk below skip values without re-validating them.
	if !json.Valid(line) {
		return nil, syntaxError(line)
	}
	i := skipWS(line, 0)
	if line[i] != '{' {
		return nil, badf("frame", "not a JSON object")
	}
	b := line[i:skipWSBack(line)]

	var typ []byte
	members(b, func(key string, val []byte) {
		if key == "type" && typ == nil {
			typ = val
		}
	})
	if typ == nil {
		return nil, badf("frame", "missing type")
	}
	if typ[0] != '"' {
		return nil, badf("frame", "type must be a string")
	}
	var f Frame
	d := &dec{}
	switch t := unquote(typ); t {
	case "hello":
		f = d.hello(b)
	case "log":
		f = d.log(b)
	case "call":
		f = d.call(b)
	case "store":
		f = d.store(b)
	case "result":
		f = d.result(b)
	case "error":
		f = d.hookError(b)
	case "context":
		f = d.context(b)
	case "refused":
		f = d.refused(b)
	case "return":
		f = d.ret(b)
	case "throw":
		f = d.throw(b)
	default:
		return nil, badf("frame", "unknown type %s", quote(t))
	}
	if d.err != nil {
		return nil, d.err
	}
	if err := f.check(); err != nil {
		return nil, err
	}
	return f, nil
}

func (d *dec) hello(b []byte) Frame {
	d.what = "hello"
	v := d.object("frame", b, "type", "protocol", "token")
	return &Hello{Protocol: int(d.int("protocol", v[1], strconv.IntSize)), Token: d.str("token", v[2])}
}

func (d *dec) log(b []byte) Frame {
	d.what = "log"
	v := d.object("frame", b, "type", "level", "message")
	return &Log{Level: d.str("level", v[1]), Message: d.str("message", v[2])}
}

func (d *dec) call(b []byte) Frame {
	d.what = "call"
	v := d.object("frame", b, "type", "id", "capability", "method", "args")
	f := &Call{ID: d.int("id", v[1], 64), Capability: d.str("capability", v[2]), Method: d.str("method", v[3])}
	if v[4] != nil { // a call without arguments may leave args out
		f.Args = d.rawList("args", v[4])
	}
	return f
}

func (d *dec) store(b []byte) Frame {
	d.what = "store"
	v := d.object("frame", b, "type", "id", "store", "method", "args")
	return &StoreOp{ID: d.int("id", v[1], 64), Store: d.str("store", v[2]), Method: d.str("method", v[3]),
		Args: d.rawList("args", v[4])}
}

func (d *dec) result(b []byte) Frame {
	d.what = "result"
	v := d.object("frame", b, "type", "outputs")
	return &Result{Outputs: d.rawMap("outputs", v[1])}
}

func (d *dec) hookError(b []byte) Frame {
	d.what = "error"
	v := d.object("frame", b, "type", "error")
	return &HookError{Error: d.errorBody(v[1], "name", "message")}
}

func (d *dec) refused(b []byte) Frame {
	d.what = "refused"
	v := d.object("frame", b, "type", "error")
	return &Refused{Error: d.errorBody(v[1], "code", "message")}
}

func (d *dec) throw(b []byte) Frame {
	d.what = "throw"
	v := d.object("frame", b, "type", "id", "error")
	return &Throw{ID: d.int("id", v[1], 64), Error: d.errorBody(v[2], "name", "code", "message")}
}

func (d *dec) ret(b []byte) Frame {
	d.what = "return"
	v := d.object("frame", b, "type", "id", "value")
	f := &Return{ID: d.int("id", v[1], 64), Value: compact(v[2])}
	if v[2] == nil {
		d.failf("missing value (null when there is none)")
	}
	return f
}

func (d *dec) context(b []byte) Frame {
	d.what = "context"
	v := d.object("frame", b, "type", "protocol", "run", "module", "hook", "inputs", "config", "declared", "capabilities")
	f := &Context{
		Protocol: int(d.int("protocol", v[1], strconv.IntSize)),
		Run:      d.str("run", v[2]),
		Module:   d.str("module", v[3]),
		Hook:     d.str("hook", v[4]),
	}
	if v[5] != nil {
		d.eachMember("inputs", v[5], func(k string, val []byte) {
			var x any
			if err := json.Unmarshal(val, &x); err != nil {
				d.failf("inputs: %s", clip(err.Error(), 80))
			}
			if f.Inputs == nil {
				f.Inputs = map[string]any{}
			}
			f.Inputs[k] = x
		})
	}
	if v[6] != nil {
		d.eachMember("config", v[6], func(k string, val []byte) {
			if f.Config == nil {
				f.Config = map[string]string{}
			}
			f.Config[k] = d.str("config value", val)
		})
	}
	if v[7] != nil {
		dv := d.object("declared", v[7], "secrets", "config")
		f.Declared = Declared{Secrets: d.strList("declared secrets", dv[0]), Config: d.strList("declared config", dv[1])}
	}
	if v[8] != nil {
		d.eachMember("capabilities", v[8], func(k string, val []byte) {
			if f.Capabilities == nil {
				f.Capabilities = map[string][]string{}
			}
			if val[0] != '[' {
				d.failf("capabilities: %s must be an array of methods", quote(k))
			}
			f.Capabilities[k] = d.strList("capability methods", val)
		})
	}
	return f
}

// dec decodes the fields of one frame, keeping the first failure so the
// per-type code above reads as a list of fields rather than error plumbing.
type dec struct {
	what string // frame type, for messages
	err  error
}

func (d *dec) failf(format string, args ...any) {
	if d.err == nil {
		d.err = badf(d.what, format, args...)
	}
}

// object returns the raw values of JSON object b in the order of keys (nil
// when absent), refusing any other key and any key given twice.
func (d *dec) object(name string, b []byte, keys ...string) [][]byte {
	vals := make([][]byte, len(keys))
	if !members(b, func(key string, val []byte) {
		for i, k := range keys {
			if k == key {
				if vals[i] != nil {
					d.failf("duplicate field %s", quote(key))
				}
				vals[i] = val
				return
			}
		}
		d.failf("unknown field %s", quote(key))
	}) {
		d.failf("%s must be an object", name)
	}
	return vals
}

// eachMember walks a map-shaped object, refusing duplicate keys: with
// duplicates, which value "wins" depends on the parser.
func (d *dec) eachMember(name string, b []byte, fn func(key string, val []byte)) {
	seen := map[string]bool{}
	if !members(b, func(key string, val []byte) {
		if seen[key] {
			d.failf("%s: duplicate key %s", name, quote(key))
		}
		seen[key] = true
		fn(key, val)
	}) {
		d.failf("%s must be an object", name)
	}
}

func (d *dec) str(name string, raw []byte) string {
	switch {
	case raw == nil:
		d.failf("missing %s", name)
	case raw[0] != '"':
		d.failf("%s must be a string", name)
	default:
		return unquote(raw)
	}
	return ""
}

func (d *dec) int(name string, raw []byte, bits int) int64 {
	if raw == nil {
		d.failf("missing %s", name)
		return 0
	}
	n, err := strconv.ParseInt(string(raw), 10, bits)
	if err != nil {
		d.failf("%s must be an integer", name)
	}
	return n
}

func (d *dec) rawList(name string, raw []byte) []json.RawMessage {
	var out []json.RawMessage
	if raw == nil {
		d.failf("missing %s", name)
	} else if !elements(raw, func(v []byte) { out = append(out, compact(v)) }) {
		d.failf("%s must be an array", name)
	}
	return out
}

func (d *dec) rawMap(name string, raw []byte) map[string]json.RawMessage {
	if raw == nil {
		d.failf("missing %s", name)
		return nil
	}
	var out map[string]json.RawMessage
	d.eachMember(name, raw, func(k string, v []byte) {
		if out == nil {
			out = map[string]json.RawMessage{}
		}
		out[k] = compact(v)
	})
	return out
}

func (d *dec) strList(name string, raw []byte) []string {
	var out []string
	if raw != nil && !elements(raw, func(v []byte) { out = append(out, d.str(name, v)) }) {
		d.failf("%s must be an array", name)
	}
	return out
}

func (d *dec) errorBody(raw []byte, keys ...string) ErrorBody {
	if raw == nil {
		d.failf("missing error")
		return ErrorBody{}
	}
	var e ErrorBody
	v := d.object("error", raw, keys...)
	for i, k := range keys {
		if v[i] == nil {
			continue
		}
		s := d.str("error "+k, v[i])
		switch k {
		case "name":
			e.Name = s
		case "code":
			e.Code = s
		case "message":
			e.Message = s
		}
	}
	return e
}

// badf is a bad_frame error about a frame of type what ("log frame:
// missing level"); what is "frame" when the type is not known yet, and
// then the message stands alone ("not JSON"), not "frame frame: not JSON".
func badf(what, format string, args ...any) *Error {
	msg := fmt.Sprintf(format, args...)
	if what != "frame" {
		msg = what + " frame: " + msg
	}
	return &Error{Code: CodeBadFrame, Message: msg}
}

func syntaxError(line []byte) error {
	if skipWS(line, 0) == len(line) {
		return badf("frame", "empty line")
	}
	var v json.RawMessage
	err := json.Unmarshal(line, &v)
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return badf("frame", "not JSON: %s (at byte %d)", clip(se.Error(), 80), se.Offset)
	}
	return badf("frame", "not JSON")
}

// The walkers below only ever see input json.Valid has accepted, so they
// skip values by counting brackets instead of parsing them. They still
// check every index: a bug here must not become a panic.

func isWS(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

func skipWS(b []byte, i int) int {
	for i < len(b) && isWS(b[i]) {
		i++
	}
	return i
}

func skipWSBack(b []byte) int {
	n := len(b)
	for n > 0 && isWS(b[n-1]) {
		n--
	}
	return n
}

func skipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(b)
}

func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return i
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				i = skipString(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return i
	}
	for i < len(b) && !isWS(b[i]) && b[i] != ',' && b[i] != '}' && b[i] != ']' {
		i++
	}
	return i
}

// members calls fn with each key (unescaped) and raw value of object b; it
// reports false when b is not an object.
func members(b []byte, fn func(key string, val []byte)) bool {
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return false
	}
	for i = skipWS(b, i+1); i < len(b) && b[i] == '"'; {
		end := skipString(b, i)
		key := unquote(b[i:end])
		i = skipWS(b, end)
		if i < len(b) && b[i] == ':' {
			i = skipWS(b, i+1)
		}
		end = skipValue(b, i)
		if end == i {
			break
		}
		fn(key, b[i:end])
		if i = skipWS(b, end); i < len(b) && b[i] == ',' {
			i = skipWS(b, i+1)
		}
	}
	return true
}

// elements calls fn with each raw value of array b; it reports false when b
// is not an array.
func elements(b []byte, fn func(val []byte)) bool {
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '[' {
		return false
	}
	for i = skipWS(b, i+1); i < len(b) && b[i] != ']'; {
		end := skipValue(b, i)
		if end == i {
			break
		}
		fn(b[i:end])
		if i = skipWS(b, end); i < len(b) && b[i] == ',' {
			i = skipWS(b, i+1)
		}
	}
	return true
}

// unquote returns the value of JSON string literal raw.
func unquote(raw []byte) string {
	if len(raw) < 2 {
		return ""
	}
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw[1 : len(raw)-1])
	}
	var s string
	_ = json.Unmarshal(raw, &s) // raw is a valid string literal
	return s
}

// compact copies raw without insignificant whitespace: the form Encode
// emits, so a decoded frame re-encodes to itself. The copy also detaches
// the value from the Reader's buffer.
func compact(raw []byte) json.RawMessage {
	if raw == nil {
		return nil
	}
	out := make([]byte, 0, len(raw))
	for i := 0; i < len(raw); i++ {
		switch c := raw[i]; {
		case c == '"':
			end := skipString(raw, i)
			out = append(out, raw[i:end]...)
			i = end - 1
		case !isWS(c):
			out = append(out, c)
		}
	}
	return out
}
