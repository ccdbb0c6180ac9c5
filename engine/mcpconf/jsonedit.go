package mcpconf

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// member is one "key": value of a JSON object, by byte offsets.
type member struct {
	key                  string
	keyStart             int // the key's opening quote
	valueStart, valueEnd int // the value's first byte and one past its last
}

// object is a JSON object's members and braces, by byte offsets.
type object struct {
	open, close int // offsets of '{' and '}'
	members     []member
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// scanObject reads the object that starts at b[start] ('{'), strictly:
// members in order with their offsets; a duplicate key is an error.
func scanObject(b []byte, start int) (object, error) {
	start = skipSpace(b, start)
	if start >= len(b) || b[start] != '{' {
		return object{}, errors.New("expected a JSON object")
	}
	o := object{open: start}
	dec := json.NewDecoder(bytes.NewReader(b[start:]))
	dec.UseNumber()
	if _, err := dec.Token(); err != nil {
		return object{}, err
	}
	seen := map[string]bool{}
	for dec.More() {
		before := start + int(dec.InputOffset())
		tok, err := dec.Token()
		if err != nil {
			return object{}, err
		}
		key, _ := tok.(string)
		if seen[key] {
			return object{}, fmt.Errorf("key %q appears twice", key)
		}
		seen[key] = true
		keyStart := skipSpace(b, before)
		if keyStart < len(b) && b[keyStart] == ',' {
			keyStart = skipSpace(b, keyStart+1)
		}
		afterKey := start + int(dec.InputOffset())
		vs := skipSpace(b, afterKey)
		if vs >= len(b) || b[vs] != ':' {
			return object{}, fmt.Errorf("expected ':' after key %q", key)
		}
		vs = skipSpace(b, vs+1)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return object{}, err
		}
		o.members = append(o.members, member{key: key, keyStart: keyStart, valueStart: vs, valueEnd: start + int(dec.InputOffset())})
	}
	if _, err := dec.Token(); err != nil { // '}'
		return object{}, err
	}
	o.close = start + int(dec.InputOffset()) - 1
	return o, nil
}

func (o object) find(key string) int {
	for i, m := range o.members {
		if m.key == key {
			return i
		}
	}
	return -1
}

// parseJSONConfig checks the whole file strictly (one JSON object, no
// trailing data, no duplicate keys in it or in "mcpServers") and finds
// the top object and "mcpServers".
func parseJSONConfig(b []byte) (top object, servers *object, err error) {
	if !json.Valid(b) {
		var v any
		err := json.Unmarshal(b, &v)
		return object{}, nil, fmt.Errorf("not valid JSON: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	var v any
	if err := dec.Decode(&v); err != nil {
		return object{}, nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return object{}, nil, errors.New("data after the top-level JSON value")
	}
	if _, ok := v.(map[string]any); !ok {
		return object{}, nil, errors.New("the top level is not a JSON object")
	}
	if top, err = scanObject(b, 0); err != nil {
		return object{}, nil, err
	}
	if i := top.find("mcpServers"); i >= 0 {
		m := top.members[i]
		if b[m.valueStart] != '{' {
			return object{}, nil, errors.New(`"mcpServers" is not a JSON object`)
		}
		s, err := scanObject(b, m.valueStart)
		if err != nil {
			return object{}, nil, fmt.Errorf(`"mcpServers": %v`, err)
		}
		servers = &s
	}
	return top, servers, nil
}

// indentOf guesses the file's indent unit from the first member's line.
func indentOf(b []byte, o object) string {
	if len(o.members) == 0 {
		return "  "
	}
	ks := o.members[0].keyStart
	ls := bytes.LastIndexByte(b[:ks], '\n')
	if ls < 0 {
		return "" // one line: keep it compact
	}
	ind := string(b[ls+1 : ks])
	if strings.Trim(ind, " \t") != "" {
		return "  "
	}
	return ind
}

// lineIndent is the whitespace that starts the line holding offset i.
func lineIndent(b []byte, i int) string {
	ls := bytes.LastIndexByte(b[:i], '\n') + 1
	j := ls
	for j < len(b) && (b[j] == ' ' || b[j] == '\t') {
		j++
	}
	return string(b[ls:j])
}

func splice(b []byte, from, to int, with string) []byte {
	out := make([]byte, 0, len(b)-(to-from)+len(with))
	out = append(out, b[:from]...)
	out = append(out, with...)
	return append(out, b[to:]...)
}

// insertMember adds "key": value (value already indented for its level)
// as the last member of o.
func insertMember(b []byte, o object, key, value, ind string) []byte {
	k, _ := json.Marshal(key)
	if ind == "" {
		if len(o.members) == 0 {
			return splice(b, o.open+1, o.close, string(k)+":"+value)
		}
		return splice(b, o.members[len(o.members)-1].valueEnd, o.members[len(o.members)-1].valueEnd, ","+string(k)+":"+value)
	}
	if len(o.members) == 0 {
		base := lineIndent(b, o.open)
		return splice(b, o.open+1, o.close, "\n"+base+ind+string(k)+": "+value+"\n"+base)
	}
	last := o.members[len(o.members)-1]
	mi := lineIndent(b, last.keyStart)
	return splice(b, last.valueEnd, last.valueEnd, ",\n"+mi+string(k)+": "+value)
}

// removeMember drops o.members[i] and the comma that joined it.
func removeMember(b []byte, o object, i int) []byte {
	m := o.members[i]
	switch {
	case i > 0:
		return splice(b, o.members[i-1].valueEnd, m.valueEnd, "")
	case len(o.members) > 1:
		return splice(b, m.keyStart, o.members[1].keyStart, "")
	default:
		return splice(b, o.open+1, o.close, "")
	}
}

// entryJSON renders the entry indented to sit at depth levels of ind.
func entryJSON(c Client, e Entry, ind, base string) (string, error) {
	v := map[string]any{"command": e.Command, "args": e.Args}
	if c.Type != "" {
		v["type"] = c.Type
	}
	var out []byte
	var err error
	if ind == "" {
		out, err = json.Marshal(v)
	} else {
		out, err = json.MarshalIndent(v, base, ind)
	}
	return string(out), err
}

// editJSON sets (e != nil) or removes (e == nil) mcpServers[name].
func editJSON(c Client, data []byte, name string, e *Entry) (out []byte, old *Entry, err error) {
	if len(bytes.TrimSpace(data)) == 0 {
		data = []byte("{}\n")
	}
	top, servers, err := parseJSONConfig(data)
	if err != nil {
		return nil, nil, err
	}
	ind := indentOf(data, top)
	if servers != nil {
		if i := servers.find(name); i >= 0 {
			m := servers.members[i]
			var prev Entry
			if json.Unmarshal(data[m.valueStart:m.valueEnd], &prev) == nil {
				old = &prev
			} else {
				old = &Entry{}
			}
			if e == nil {
				return removeMember(data, *servers, i), old, nil
			}
			val, err := entryJSON(c, *e, ind, lineIndent(data, m.keyStart))
			if err != nil {
				return nil, nil, err
			}
			return splice(data, m.valueStart, m.valueEnd, val), old, nil
		}
		if e == nil {
			return data, nil, nil
		}
		base := lineIndent(data, servers.open) + ind
		if len(servers.members) > 0 {
			base = lineIndent(data, servers.members[len(servers.members)-1].keyStart)
		}
		val, err := entryJSON(c, *e, ind, base)
		if err != nil {
			return nil, nil, err
		}
		return insertMember(data, *servers, name, val, ind), nil, nil
	}
	if e == nil {
		return data, nil, nil
	}
	base := ind
	if len(top.members) > 0 {
		base = lineIndent(data, top.members[len(top.members)-1].keyStart)
	}
	val, err := entryJSON(c, *e, ind, base+ind)
	if err != nil {
		return nil, nil, err
	}
	k, _ := json.Marshal(name)
	var obj string
	if ind == "" {
		obj = "{" + string(k) + ":" + val + "}"
	} else {
		obj = "{\n" + base + ind + string(k) + ": " + val + "\n" + base + "}"
	}
	return insertMember(data, top, "mcpServers", obj, ind), nil, nil
}

// findJSON reads mcpServers[name], if any.
func findJSON(data []byte, name string) (*Entry, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, nil
	}
	_, servers, err := parseJSONConfig(data)
	if err != nil || servers == nil {
		return nil, err
	}
	i := servers.find(name)
	if i < 0 {
		return nil, nil
	}
	m := servers.members[i]
	var e Entry
	if err := json.Unmarshal(data[m.valueStart:m.valueEnd], &e); err != nil {
		return nil, fmt.Errorf("mcpServers.%s: %v", name, err)
	}
	return &e, nil
}
