package mcpconf

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// The plugin-root form of an MCP client's config: an unpacked, operator-
// owned local plugin root (the Agent Plugins layout), whose mcp.json
// template {"$schema": ..., "mcpServers": {}} warden fills with one stdio
// server, itself. The checks are the seed's own (desktop-manifest.js of
// pi-chat-exchange), each a Refusal that names it and changes nothing:
//
//   - the root is absolute, canonical, yours and 0700;
//   - the template is a regular file, opened with O_NOFOLLOW, yours, with
//     one link, at most MaxPluginTemplate, not group or world writable;
//   - the template holds exactly {$schema, mcpServers: {}}, $schema one of
//     PluginSchemas;
//   - the new file is written O_EXCL 0600 beside it and fsynced; dev, ino,
//     size and mtime of the template are checked again before the rename;
//     the temp file is removed on any failure.

// PluginFile is the template's name in the plugin root.
const PluginFile = "mcp.json"

// MaxPluginTemplate bounds the template's size.
const MaxPluginTemplate = 16 << 10

// PluginRootVar is how the plugin host names the root in a server entry:
// the server starts there, wherever the host unpacked the plugin.
const PluginRootVar = "${PLUGIN_ROOT}"

// PluginSchemas are the Agent Plugins MCP schemas a template may name.
var PluginSchemas = []string{
	"https://agent-plugins.org/schemas/1.0.0/mcp.schema.json",
	"https://agent-plugins.org/schemas/1.1.0/mcp.schema.json",
}

// PluginPrep is a prepared plugin root: its mcp.json as it will be.
type PluginPrep struct {
	Root, Path, Name string
	Schema           string
	Entry            Entry
	After            []byte
	orig             original
}

// PreparePlugin checks root and its template, and the warden binary e
// runs (AdmitExecutable), and returns the new mcp.json. Nothing is
// written until Apply.
func PreparePlugin(root, name string, e Entry) (*PluginPrep, error) {
	if err := CheckName(name); err != nil {
		return nil, err
	}
	if err := checkPluginRoot(root); err != nil {
		return nil, err
	}
	if err := AdmitExecutable(e.Command); err != nil {
		return nil, err
	}
	path := filepath.Join(root, PluginFile)
	orig, err := readPluginTemplate(path)
	if err != nil {
		return nil, err
	}
	schema, err := parsePluginTemplate(path, orig.data)
	if err != nil {
		return nil, err
	}
	type server struct {
		Type    string   `json:"type"`
		Command string   `json:"command"`
		Args    []string `json:"args"`
		Cwd     string   `json:"cwd"`
	}
	doc := struct {
		Schema  string            `json:"$schema"`
		Servers map[string]server `json:"mcpServers"`
	}{schema, map[string]server{name: {Type: "stdio", Command: e.Command, Args: e.Args, Cwd: PluginRootVar}}}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // ${PLUGIN_ROOT} and paths stay as written
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	return &PluginPrep{Root: root, Path: path, Name: name, Schema: schema, Entry: e, After: b.Bytes(), orig: orig}, nil
}

// Apply writes the prepared mcp.json over the template, if the template
// is still what was read.
func (p *PluginPrep) Apply() error {
	_, err := writeFile(p.Path, p.orig, p.After, false)
	return err
}

func checkPluginRoot(root string) error {
	refuse := func(check, problem, fix string) error {
		return &Refusal{Path: root, Check: "plugin root: " + check, Problem: problem, Fix: fix}
	}
	if !filepath.IsAbs(root) || filepath.Clean(root) != root {
		return refuse("absolute and canonical", "not an absolute, clean path", "give the root's full path, e.g. "+filepath.Clean(root))
	}
	if real, err := filepath.EvalSymlinks(root); err == nil && real != root {
		return refuse("absolute and canonical", "goes through a symlink (its real path is "+real+")", "give the canonical path "+real)
	}
	var st unix.Stat_t
	if err := unix.Lstat(root, &st); err != nil {
		return refuse("present", err.Error(), "unpack the plugin there first")
	}
	uid := uint32(os.Geteuid())
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFDIR:
		return refuse("a directory", "not a directory", "give the plugin's root directory")
	case st.Uid != uid:
		return refuse("yours", fmt.Sprintf("owned by uid %d, not you (uid %d)", st.Uid, uid), fmt.Sprintf("prepare it as its owner (uid %d), or use a dir of your own: warden does not take over another user's", st.Uid))
	case st.Mode&0o7777 != 0o700:
		return refuse("0700", fmt.Sprintf("mode %04o", st.Mode&0o7777), "chmod 700 "+root)
	}
	return nil
}

// readPluginTemplate reads the template under the seed's rules.
func readPluginTemplate(path string) (original, error) {
	refuse := func(check, problem, fix string) (original, error) {
		return original{}, &Refusal{Path: path, Check: "template: " + check, Problem: problem, Fix: fix}
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	switch {
	case errors.Is(err, unix.ENOENT):
		return refuse("present", "there is no "+PluginFile, `write the template first: {"$schema": "`+PluginSchemas[0]+`", "mcpServers": {}}`)
	case errors.Is(err, unix.ELOOP):
		return refuse("not a symlink", "it is a symlink", "replace it with a regular file")
	case err != nil:
		return refuse("readable", err.Error(), "check its permissions")
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return original{}, err
	}
	uid := uint32(os.Geteuid())
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return refuse("regular file", "not a regular file", "replace it with a regular file")
	case st.Uid != uid:
		return refuse("yours", fmt.Sprintf("owned by uid %d, not you (uid %d)", st.Uid, uid), fmt.Sprintf("run this as its owner (uid %d), or use a dir of your own: warden does not take over another user's", st.Uid))
	case st.Nlink != 1:
		return refuse("one link", fmt.Sprintf("it has %d hard links", st.Nlink), "make it a single file (cp --remove-destination)")
	case st.Size > MaxPluginTemplate:
		return refuse("at most 16 KiB", fmt.Sprintf("it is %d bytes", st.Size), "write the template afresh")
	case st.Mode&0o022 != 0:
		return refuse("not group or world writable", fmt.Sprintf("mode %04o lets others change it", st.Mode&0o7777), "chmod go-w "+path)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxPluginTemplate+1))
	if err != nil {
		return original{}, err
	}
	if int64(len(data)) != st.Size {
		return refuse("unchanged while read", "its size changed while it was read", "run the command again")
	}
	return original{exists: true, data: data, id: idOf(&st), mode: os.FileMode(st.Mode & 0o777)}, nil
}

// parsePluginTemplate holds the template to exactly {$schema,
// mcpServers: {}} and returns its schema.
func parsePluginTemplate(path string, data []byte) (string, error) {
	refuse := func(problem string) (string, error) {
		return "", &Refusal{Path: path, Check: "template: exactly {$schema, mcpServers: {}}", Problem: problem,
			Fix: `write the template afresh: {"$schema": "` + PluginSchemas[0] + `", "mcpServers": {}}`}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	var top map[string]json.RawMessage
	if err := dec.Decode(&top); err != nil || top == nil {
		return refuse(fmt.Sprintf("not a JSON object (%v)", err))
	}
	if _, err := dec.Token(); err != io.EOF {
		return refuse("more than one JSON value")
	}
	// The keys as written: a map would hide a repeated one.
	keys, err := topKeys(data)
	if err != nil {
		return refuse(err.Error())
	}
	if len(keys) != 2 || top["$schema"] == nil || top["mcpServers"] == nil {
		return refuse(fmt.Sprintf("its keys are %q", keys))
	}
	var schema string
	if err := json.Unmarshal(top["$schema"], &schema); err != nil || !contains(PluginSchemas, schema) {
		return refuse(fmt.Sprintf("$schema is %s, not one of %q", top["$schema"], PluginSchemas))
	}
	var servers map[string]json.RawMessage
	if err := json.Unmarshal(top["mcpServers"], &servers); err != nil || servers == nil || len(servers) != 0 {
		return refuse("mcpServers is " + string(top["mcpServers"]) + ", not an empty object")
	}
	return schema, nil
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// topKeys lists the keys of the JSON object data, in order, repeats
// included.
func topKeys(data []byte) ([]string, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, errors.New("not a JSON object")
	}
	var keys []string
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		keys = append(keys, t.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil, err
		}
	}
	return keys, nil
}
