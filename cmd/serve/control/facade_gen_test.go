package control

// The typed control socket is generated from engine.Facade: one server
// handler and one Client stub per method that crosses the socket by name
// (facade_gen.go). Reflection is used here, when the code is written and
// checked, never when a call is served.
//
// After changing engine.Facade:
//
//	go generate ./cmd/serve/control
//
// TestFacadeCodeIsCurrent fails until that is done; TestWireParameters
// fails for a method whose parameters or results JSON cannot carry.

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"go/format"
	"os"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/wardenhq/warden/engine"
	"github.com/wardenhq/warden/engine/hands"
)

var update = flag.Bool("update", false, "rewrite facade_gen.go from engine.Facade")

const genFile = "facade_gen.go"

var (
	ctxType   = reflect.TypeFor[context.Context]()
	actorType = reflect.TypeFor[engine.Actor]()
	errType   = reflect.TypeFor[error]()
)

// facadeMethod is one Facade method as the socket sees it: which
// parameters travel (Wire), which are the call's own context or the
// peer's actor, and what comes back.
type facadeMethod struct {
	Name    string
	In      []reflect.Type // every parameter, in order
	Out     []reflect.Type // every result but the final error
	Special bool           // served by hand (see special): its stub is hand-written
}

// wire lists the parameters that travel as JSON.
func (m facadeMethod) wire() []reflect.Type {
	var out []reflect.Type
	for _, t := range m.In {
		if t != ctxType && t != actorType {
			out = append(out, t)
		}
	}
	return out
}

// remoteMethods are the Facade's methods that cross the socket by name,
// sorted; it fails on one whose last result is not an error (a broken
// connection would have nowhere to go).
func remoteMethods(t *testing.T) []facadeMethod {
	t.Helper()
	ft := reflect.TypeFor[engine.Facade]()
	var ms []facadeMethod
	for i := range ft.NumMethod() {
		m := ft.Method(i)
		if local[m.Name] {
			continue
		}
		fm := facadeMethod{Name: m.Name, Special: special[m.Name]}
		for j := range m.Type.NumIn() {
			fm.In = append(fm.In, m.Type.In(j))
		}
		n := m.Type.NumOut()
		if n == 0 || m.Type.Out(n-1) != errType {
			t.Errorf("Facade.%s: its last result must be an error, so that a broken connection can be reported; it cannot cross the control socket", m.Name)
			continue
		}
		for j := range n - 1 {
			fm.Out = append(fm.Out, m.Type.Out(j))
		}
		ms = append(ms, fm)
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].Name < ms[j].Name })
	return ms
}

// typeName spells t in Go source, noting the packages it needs.
func typeName(t reflect.Type, imports map[string]bool) string {
	if t.Name() != "" {
		if t.PkgPath() != "" {
			imports[t.PkgPath()] = true
			return t.String() // "engine.Receipt": package name, then type
		}
		return t.Name()
	}
	switch t.Kind() {
	case reflect.Pointer:
		return "*" + typeName(t.Elem(), imports)
	case reflect.Slice:
		return "[]" + typeName(t.Elem(), imports)
	case reflect.Map:
		return "map[" + typeName(t.Key(), imports) + "]" + typeName(t.Elem(), imports)
	case reflect.Array:
		return fmt.Sprintf("[%d]%s", t.Len(), typeName(t.Elem(), imports))
	}
	return t.String()
}

// generate writes facade_gen.go's source.
func generate(ms []facadeMethod) ([]byte, error) {
	imports := map[string]bool{"github.com/wardenhq/warden/engine": true}
	var handlers, stubs bytes.Buffer
	for _, m := range ms {
		if m.Special {
			continue
		}
		// Server: decode the wire parameters, call, return the results.
		var decl, decode, call []string
		w := 0
		for _, t := range m.In {
			switch t {
			case ctxType:
				imports["context"] = true
				call = append(call, "ctx")
			case actorType:
				call = append(call, "actor")
			default:
				name := fmt.Sprintf("a%d", w)
				decl = append(decl, fmt.Sprintf("var %s %s", name, typeName(t, imports)))
				decode = append(decode, "&"+name)
				call = append(call, name)
				w++
			}
		}
		var results []string
		for i := range m.Out {
			results = append(results, fmt.Sprintf("r%d", i))
		}
		fmt.Fprintf(&handlers, "\t%q: func(ctx context.Context, e engine.Facade, actor engine.Actor, args []json.RawMessage) ([]any, error) {\n", m.Name)
		for _, d := range decl {
			fmt.Fprintf(&handlers, "\t\t%s\n", d)
		}
		fmt.Fprintf(&handlers, "\t\tif err := decodeArgs(%q, args, %s); err != nil {\n\t\t\treturn nil, err\n\t\t}\n", m.Name, strings.Join(decode, ", "))
		if len(results) == 0 {
			fmt.Fprintf(&handlers, "\t\treturn nil, e.%s(%s)\n\t},\n", m.Name, strings.Join(call, ", "))
		} else {
			fmt.Fprintf(&handlers, "\t\t%s, err := e.%s(%s)\n\t\treturn []any{%s}, err\n\t},\n",
				strings.Join(results, ", "), m.Name, strings.Join(call, ", "), strings.Join(results, ", "))
		}

		// Client: send the wire parameters, decode the results.
		var params, args, outs, named []string
		ctx := "context.Background()"
		w = 0
		for _, t := range m.In {
			switch t {
			case ctxType:
				params = append(params, "ctx context.Context")
				ctx = "ctx"
			case actorType:
				params = append(params, "_ engine.Actor")
			default:
				name := fmt.Sprintf("a%d", w)
				params = append(params, name+" "+typeName(t, imports))
				args = append(args, name)
				w++
			}
		}
		for i, t := range m.Out {
			named = append(named, fmt.Sprintf("r%d %s", i, typeName(t, imports)))
			outs = append(outs, fmt.Sprintf("&r%d", i))
		}
		named = append(named, "err error")
		argList := "nil"
		if len(args) > 0 {
			argList = "[]any{" + strings.Join(args, ", ") + "}"
		}
		doArgs := []string{ctx, "nil", fmt.Sprintf("%q", m.Name), argList}
		fmt.Fprintf(&stubs, "\n// %s calls engine.Facade.%s in the serving process.\n", m.Name, m.Name)
		fmt.Fprintf(&stubs, "func (c *Client) %s(%s) (%s) {\n\terr = c.do(%s)\n\treturn\n}\n",
			m.Name, strings.Join(params, ", "), strings.Join(named, ", "), strings.Join(append(doArgs, outs...), ", "))
	}
	imports["context"] = true
	imports["encoding/json"] = true
	var src bytes.Buffer
	src.WriteString("// Code generated by go generate (TestFacadeCodeIsCurrent -update) from engine.Facade; DO NOT EDIT.\n\npackage control\n\nimport (\n")
	paths := make([]string, 0, len(imports))
	for p := range imports {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	for _, p := range paths {
		if !strings.Contains(p, ".") && !strings.HasPrefix(p, "github.com/wardenhq/warden/") {
			fmt.Fprintf(&src, "\t%q\n", p)
		}
	}
	src.WriteString("\n")
	for _, p := range paths {
		if strings.HasPrefix(p, "github.com/wardenhq/warden/") {
			fmt.Fprintf(&src, "\t%q\n", p)
		}
	}
	src.WriteString(")\n\n")
	src.WriteString("// handlers serve the facade methods a client calls by name: one typed\n// handler each, generated from engine.Facade, so that the table is the\n// allow-list (nothing else can be called) and every parameter is decoded\n// into its own type. Context parameters are the call's own; Actor\n// parameters are the peer's, never sent.\n")
	src.WriteString("var handlers = map[string]handler{\n")
	src.Write(handlers.Bytes())
	src.WriteString("}\n")
	src.Write(stubs.Bytes())
	return format.Source(src.Bytes())
}

// TestFacadeCodeIsCurrent: facade_gen.go is what engine.Facade generates
// now. Run `go generate ./cmd/serve/control` to rewrite it.
func TestFacadeCodeIsCurrent(t *testing.T) {
	want, err := generate(remoteMethods(t))
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(genFile, want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(genFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is out of date with engine.Facade: run `go generate ./cmd/serve/control`", genFile)
	}
}

// TestDispatchCoversTheFacade: every Facade method is served exactly one
// way: locally by the Client, by hand (special), or by a generated handler.
func TestDispatchCoversTheFacade(t *testing.T) {
	for _, m := range remoteMethods(t) {
		_, generated := handlers[m.Name]
		if generated == m.Special {
			t.Errorf("Facade.%s: generated handler %v, served by hand %v: want exactly one", m.Name, generated, m.Special)
		}
	}
	for name := range handlers {
		if _, ok := reflect.TypeFor[engine.Facade]().MethodByName(name); !ok {
			t.Errorf("handler %s is not a Facade method", name)
		}
	}
}

// TestWireParameters: every parameter and result of every method that
// crosses the socket survives JSON: a value of its type is encoded and
// decoded back, and its type holds nothing JSON cannot carry (a func, a
// chan, an interface with methods) unless the field says json:"-".
func TestWireParameters(t *testing.T) {
	for _, m := range remoteMethods(t) {
		var types []reflect.Type
		for _, typ := range m.wire() {
			if m.Special && typ.Kind() == reflect.Func {
				// served by hand: a callback travels as a bool ("relay
				// it to me"), and what it is given as progress/ask ops.
				typ = reflect.TypeFor[bool]()
			}
			types = append(types, typ)
		}
		types = append(types, m.Out...)
		for i, typ := range types {
			what := fmt.Sprintf("Facade.%s: %s (%d)", m.Name, typ, i+1)
			if why := cannotCross(typ, map[reflect.Type]bool{}); why != "" {
				t.Errorf("%s cannot cross the control socket: %s", what, why)
				continue
			}
			v := reflect.New(typ)
			fill(v.Elem(), 3)
			b, err := json.Marshal(v.Interface())
			if err != nil {
				t.Errorf("%s: encoding: %v", what, err)
				continue
			}
			back := reflect.New(typ)
			dec := json.NewDecoder(bytes.NewReader(b))
			dec.DisallowUnknownFields()
			if err := dec.Decode(back.Interface()); err != nil {
				t.Errorf("%s: decoding %s: %v", what, b, err)
			}
		}
	}
}

// cannotCross says why JSON cannot carry a value of t, or "".
func cannotCross(t reflect.Type, seen map[reflect.Type]bool) string {
	if seen[t] {
		return ""
	}
	seen[t] = true
	if t.Implements(reflect.TypeFor[json.Unmarshaler]()) || reflect.PointerTo(t).Implements(reflect.TypeFor[json.Unmarshaler]()) {
		return "" // it decodes itself
	}
	switch t.Kind() {
	case reflect.Func, reflect.Chan, reflect.UnsafePointer, reflect.Complex64, reflect.Complex128:
		return "a " + t.Kind().String()
	case reflect.Interface:
		if t.NumMethod() > 0 {
			return "an interface (" + t.String() + "): JSON cannot say which type to decode"
		}
	case reflect.Pointer, reflect.Slice, reflect.Array:
		return cannotCross(t.Elem(), seen)
	case reflect.Map:
		if why := cannotCross(t.Key(), seen); why != "" {
			return "map key: " + why
		}
		return cannotCross(t.Elem(), seen)
	case reflect.Struct:
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() || f.Tag.Get("json") == "-" {
				continue
			}
			if why := cannotCross(f.Type, seen); why != "" {
				return t.String() + "." + f.Name + ": " + why
			}
		}
	}
	return ""
}

// fill gives v non-zero contents, depth levels deep, so that the round
// trip exercises every field, element and key.
func fill(v reflect.Value, depth int) {
	if depth == 0 || !v.CanSet() {
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString("x")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(7)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(7)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(1.5)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fill(p.Elem(), depth-1)
		v.Set(p)
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			v.SetBytes([]byte(`"x"`)) // json.RawMessage must hold JSON
			return
		}
		s := reflect.MakeSlice(v.Type(), 1, 1)
		fill(s.Index(0), depth-1)
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(k, depth-1)
		fill(e, depth-1)
		if e.Kind() == reflect.Interface {
			e = reflect.ValueOf("x")
		}
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.Struct:
		if v.Type().PkgPath() == "time" {
			return // a time.Time is encoded by its own rules
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() && v.Type().Field(i).Tag.Get("json") != "-" {
				fill(v.Field(i), depth-1)
			}
		}
	}
}

// TestCannotCross: the rule TestWireParameters holds the Facade to finds
// what JSON cannot carry, and passes what it can.
func TestCannotCross(t *testing.T) {
	type withFunc struct{ F func() }
	type withHiddenFunc struct {
		F func() `json:"-"`
		S string
	}
	for typ, bad := range map[reflect.Type]bool{
		reflect.TypeFor[func()]():              true,
		reflect.TypeFor[chan int]():            true,
		reflect.TypeFor[error]():               true,
		reflect.TypeFor[withFunc]():            true,
		reflect.TypeFor[map[string]withFunc](): true,
		reflect.TypeFor[[]complex128]():        true,
		reflect.TypeFor[withHiddenFunc]():      false,
		reflect.TypeFor[engine.RunRequest]():   false,
		reflect.TypeFor[map[string]any]():      false,
		reflect.TypeFor[json.RawMessage]():     false,
	} {
		if why := cannotCross(typ, map[reflect.Type]bool{}); (why != "") != bad {
			t.Errorf("%s: cannotCross says %q, want bad=%v", typ, why, bad)
		}
	}
}

// An error's fixes cross the socket: a console attached to another
// process lists the same next steps as one that holds the engine.
func TestFixesCrossTheSocket(t *testing.T) {
	fix := &hands.FixError{Problem: "no Docker socket at /x", Fix: "start dockerd or pass the right --engine-socket"}
	for _, err := range []error{
		fmt.Errorf("hands init: %w", fix),
		&engine.HandsInitFailedError{Root: "/r", Cause: fix},
	} {
		back := decodeError(encodeError(err))
		if back.Error() != err.Error() {
			t.Errorf("message changed: %q -> %q", err, back)
		}
		if got := hands.Fixes(back); !slices.Equal(got, []string{fix.Fix}) {
			t.Errorf("%T: fixes after the socket %q, want %q", err, got, fix.Fix)
		}
	}
}
