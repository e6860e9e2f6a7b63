package config

import (
	"fmt"
	"io"
	"strings"
)

// WriteReference writes the settings as a Markdown reference: one table per
// section with each setting's YAML key, environment variable, flag, type,
// default and help, in declaration order. keyNote, if not nil, returns a
// note for a YAML path (which program takes it, say), shown after its help.
// docs/configuration.md is generated with it (see cmd/crawler), so the
// reference cannot drift from the settings.
func (l *Loader) WriteReference(w io.Writer, keyNote func(path string) string) {
	cell := func(s string) string { return strings.ReplaceAll(strings.ReplaceAll(s, "|", `\|`), "\n", " ") }
	section := "\x00"
	for _, f := range l.fields {
		if f.section != section {
			section = f.section
			fmt.Fprintf(w, "\n## %s\n\n", orTop(section))
			fmt.Fprintln(w, "| YAML key | environment | flag | type | default | what it does |")
			fmt.Fprintln(w, "|---|---|---|---|---|---|")
		}
		def := f.def
		if def == "" {
			def = `""`
		}
		help := f.help
		if keyNote != nil {
			if n := keyNote(f.path); n != "" {
				help += " (" + n + ")"
			}
		}
		for _, old := range f.old {
			help += "; former key `" + old + "`"
		}
		fmt.Fprintf(w, "| `%s` | `%s` | `--%s` | %s | `%s` | %s |\n", f.path, f.env, f.flag, typeName(f.v), cell(def), cell(help))
	}
}
