package mcpconf

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"
)

// span is a byte range of the file.
type span struct{ from, to int }

// tomlSections finds the [mcp_servers.<name>] table (and its subtables,
// such as [mcp_servers.<name>.env]) as byte spans: each from its header
// line to the next header. An entry written any other way (dotted keys,
// an inline table) is refused: it cannot be edited without rewriting
// what is around it.
func tomlSections(data []byte, name string) ([]span, error) {
	var p unstable.Parser
	p.Reset(data)
	type header struct {
		path  []string
		start int
	}
	var headers []header
	var current []string
	var inline error
	for p.NextExpression() {
		e := p.Expression()
		switch e.Kind {
		case unstable.Table, unstable.ArrayTable:
			var path []string
			it := e.Key()
			first := -1
			for it.Next() {
				k := it.Node()
				if first < 0 {
					first = int(k.Raw.Offset)
				}
				path = append(path, string(k.Data))
			}
			start := bytes.LastIndexByte(data[:first], '\n') + 1
			headers = append(headers, header{path: path, start: start})
			current = path
		case unstable.KeyValue:
			var path []string
			path = append(path, current...)
			it := e.Key()
			for it.Next() {
				path = append(path, string(it.Node().Data))
			}
			if len(path) >= 2 && path[0] == "mcp_servers" && path[1] == name && !(len(current) >= 2 && current[0] == "mcp_servers" && current[1] == name) {
				inline = fmt.Errorf("mcp_servers.%s is written as dotted keys or an inline table, which warden does not edit; edit it by hand, or write it as a [mcp_servers.%s] table", name, name)
			}
		}
	}
	if err := p.Error(); err != nil {
		return nil, err
	}
	if inline != nil {
		return nil, inline
	}
	var out []span
	for i, h := range headers {
		if len(h.path) >= 2 && h.path[0] == "mcp_servers" && h.path[1] == name {
			end := len(data)
			if i+1 < len(headers) {
				end = headers[i+1].start
			}
			out = append(out, span{h.start, end})
		}
	}
	return out, nil
}

// strictTOML decodes the whole file (duplicate keys and malformed TOML
// are errors) and checks mcp_servers is a table.
func strictTOML(data []byte) (map[string]any, error) {
	var doc map[string]any
	if err := toml.Unmarshal(data, &doc); err != nil {
		var de *toml.DecodeError
		if errors.As(err, &de) {
			row, col := de.Position()
			return nil, fmt.Errorf("line %d, column %d: %v", row, col, de)
		}
		return nil, err
	}
	if s, ok := doc["mcp_servers"]; ok {
		if _, ok := s.(map[string]any); !ok {
			return nil, errors.New("mcp_servers is not a table")
		}
	}
	return doc, nil
}

func tomlEntry(name string, e Entry) (string, error) {
	body, err := toml.Marshal(e)
	if err != nil {
		return "", err
	}
	return "[mcp_servers." + name + "]\n" + string(body), nil
}

// editTOML sets (e != nil) or removes (e == nil) [mcp_servers.<name>].
func editTOML(data []byte, name string, e *Entry) (out []byte, old *Entry, err error) {
	doc, err := strictTOML(data)
	if err != nil {
		return nil, nil, err
	}
	if prev := tomlServer(doc, name); prev != nil {
		old = prev
	}
	spans, err := tomlSections(data, name)
	if err != nil {
		return nil, nil, err
	}
	var section string
	if e != nil {
		if section, err = tomlEntry(name, *e); err != nil {
			return nil, nil, err
		}
	}
	if len(spans) == 0 {
		if e == nil {
			return data, old, nil
		}
		out = append([]byte{}, data...)
		if len(out) > 0 && !bytes.HasSuffix(out, []byte("\n")) {
			out = append(out, '\n')
		}
		if len(bytes.TrimSpace(out)) > 0 {
			out = append(out, '\n')
		}
		return append(out, section...), old, nil
	}
	// The first section is replaced in place; the others go. A section
	// removed from the end takes the blank line before it along (the one
	// an install put there).
	var b bytes.Buffer
	at := 0
	for i, s := range spans {
		if e == nil && s.to == len(data) && s.from >= 2 && data[s.from-1] == '\n' && data[s.from-2] == '\n' && s.from-1 >= at {
			s.from--
		}
		b.Write(data[at:s.from])
		if i == 0 && e != nil {
			b.WriteString(section)
			// Keep the blank line that separated it from what follows.
			if tail := data[s.from:s.to]; bytes.HasSuffix(tail, []byte("\n\n")) {
				b.WriteString("\n")
			}
		}
		at = s.to
	}
	b.Write(data[at:])
	return b.Bytes(), old, nil
}

func tomlServer(doc map[string]any, name string) *Entry {
	s, _ := doc["mcp_servers"].(map[string]any)
	w, ok := s[name].(map[string]any)
	if !ok {
		return nil
	}
	e := &Entry{}
	e.Command, _ = w["command"].(string)
	e.ApprovalMode, _ = w["default_tools_approval_mode"].(string)
	if args, ok := w["args"].([]any); ok {
		for _, a := range args {
			if s, ok := a.(string); ok {
				e.Args = append(e.Args, s)
			}
		}
	}
	return e
}

func findTOML(data []byte, name string) (*Entry, error) {
	doc, err := strictTOML(data)
	if err != nil {
		return nil, err
	}
	return tomlServer(doc, name), nil
}
