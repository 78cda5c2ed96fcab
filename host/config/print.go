package config

import (
	"io"
	"reflect"
	"strconv"
	"strings"
	"time"

	yamlv3 "go.yaml.in/yaml/v3"
)

// Print writes the configuration as YAML, as `weft config` shows it: in
// declaration order, secrets masked, and the source of every value that
// is not a default as a comment. What it writes is a configuration file
// that loads back to the same values.
func (c *Loaded) Print(w io.Writer) error {
	enc := yamlv3.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(c.yamlNode()); err != nil {
		return err
	}
	return enc.Close()
}

// yamlNode renders the configuration as YAML in declaration order, with
// secrets masked and, as a line comment, the source of every value that
// is not a default.
func (c *Loaded) yamlNode() *yamlv3.Node {
	root := &yamlv3.Node{Kind: yamlv3.MappingNode}
	sections := map[string]*yamlv3.Node{"": root}
	// section returns the mapping of a dotted section (plugins.http),
	// made inside its parent's the first time.
	var section func(path string) *yamlv3.Node
	section = func(path string) *yamlv3.Node {
		if m := sections[path]; m != nil {
			return m
		}
		parent, name := root, path
		if i := strings.LastIndexByte(path, '.'); i >= 0 {
			parent, name = section(path[:i]), path[i+1:]
		}
		m := &yamlv3.Node{Kind: yamlv3.MappingNode}
		parent.Content = append(parent.Content, scalar(name), m)
		sections[path] = m
		return m
	}
	rv := reflect.ValueOf(c.settings)
	for _, key := range configKeys() {
		parent := root
		name := key.name
		if i := strings.LastIndexByte(key.name, '.'); i >= 0 {
			parent, name = section(key.name[:i]), key.name[i+1:]
		}
		k, v := scalar(name), valueNode(rv.FieldByIndex(key.index))
		if src := c.Source[key.name]; src != "" {
			// yaml.v3 misplaces a key's line comment after a flow
			// sequence; on the value it stays on the line.
			if v.Kind == yamlv3.SequenceNode && v.Style == yamlv3.FlowStyle {
				v.LineComment = "from " + src
			} else {
				k.LineComment = "from " + src
			}
		}
		parent.Content = append(parent.Content, k, v)
	}
	return root
}

// scalar is a YAML string.
func scalar(s string) *yamlv3.Node {
	return &yamlv3.Node{Kind: yamlv3.ScalarNode, Tag: "!!str", Value: s}
}

// valueNode is a leaf's value as YAML, written as it is read back.
func valueNode(v reflect.Value) *yamlv3.Node {
	switch v.Type() {
	case durationType:
		return scalar(formatDuration(time.Duration(v.Int())))
	case byteSizeType:
		n := scalar(byteSize(v.Int()).String())
		if _, err := strconv.Atoi(n.Value); err == nil {
			n.Tag = "!!int"
		}
		return n
	case stringsType:
		n := &yamlv3.Node{Kind: yamlv3.SequenceNode, Style: yamlv3.FlowStyle}
		for _, s := range v.Interface().([]string) {
			n.Content = append(n.Content, scalar(s))
		}
		return n
	case tokensType:
		n := &yamlv3.Node{Kind: yamlv3.SequenceNode}
		if v.Len() == 0 {
			n.Style = yamlv3.FlowStyle
		}
		for _, t := range v.Interface().([]tokenConfig) {
			n.Content = append(n.Content, &yamlv3.Node{Kind: yamlv3.MappingNode, Style: yamlv3.FlowStyle, Content: []*yamlv3.Node{
				scalar("name"), scalar(t.Name), scalar("role"), scalar(t.Role), scalar("token"), scalar(maskToken(t.Token)),
			}})
		}
		return n
	}
	if v.Kind() == reflect.Int {
		return &yamlv3.Node{Kind: yamlv3.ScalarNode, Tag: "!!int", Value: strconv.FormatInt(v.Int(), 10)}
	}
	if v.Kind() == reflect.Float64 {
		f := strconv.FormatFloat(v.Float(), 'g', -1, 64)
		tag := "!!float"
		if _, err := strconv.Atoi(f); err == nil {
			tag = "!!int" // 1, not 1.0: read back as a number all the same
		}
		return &yamlv3.Node{Kind: yamlv3.ScalarNode, Tag: tag, Value: f}
	}
	if v.Kind() == reflect.Bool {
		return &yamlv3.Node{Kind: yamlv3.ScalarNode, Tag: "!!bool", Value: strconv.FormatBool(v.Bool())}
	}
	return scalar(v.String())
}

// formatDuration is d.String() without the zero units it ends with: 10m
// rather than 10m0s, 24h rather than 24h0m0s.
func formatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// maskToken hides a secret for display: a digest keeps its form, a plain
// token shows nothing of itself.
func maskToken(t string) string {
	if strings.HasPrefix(t, "sha256:") {
		return "sha256:****"
	}
	return "****"
}
