package config

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// EnvPrefix starts the name of every environment variable config reads.
const EnvPrefix = "SIEVE_"

// FieldError names the setting that could not be used, and where its value
// came from.
type FieldError struct {
	// Field is the setting's YAML path, e.g. "filter.fpp".
	Field string
	// Source says where the value came from: "flag --filter-fpp",
	// "env SIEVE_FILTER_FPP", "file sieve.yaml"; empty for a validation
	// error about the final value.
	Source string
	// Err says what is wrong.
	Err error
}

func (e *FieldError) Error() string {
	if e.Source == "" {
		return fmt.Sprintf("config: %s: %v", e.Field, e.Err)
	}
	return fmt.Sprintf("config: %s (%s): %v", e.Field, e.Source, e.Err)
}

// Unwrap returns the underlying error.
func (e *FieldError) Unwrap() error { return e.Err }

func invalid(field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Err: fmt.Errorf(format, args...)}
}

// Loader fills a configuration struct from, in increasing precedence, the
// struct's initial (default) values, a YAML file, environment variables and
// command-line flags. Every exported field of the struct with a yaml tag is a
// setting; nested structs are sections. A setting's YAML path "a.b_c" is also
// the flag --a-b-c and the environment variable SIEVE_A_B_C, and its help tag
// documents it. A tag old:"name[,name]" keeps former names of a setting
// working (in the file, the environment and flags), unlisted in the help.
//
// Supported field types: string, bool, int, int64, uint64, float64,
// time.Duration, Bytes and []string (comma-separated in flags and env; a
// list flag given again adds to the list: --seed a --seed b,c is a, b
// and c).
//
// Load records which settings were given explicitly (Given): a section
// struct with a field "Given []string `yaml:\"-\"`" receives the keys of
// its settings given (Filter.Given), so that a stored filter's parameters
// can be told from defaults.
//
// A Loader is used by one goroutine: NewLoader, then the FlagSet's Parse,
// then Load.
type Loader struct {
	target any
	skip   map[string]bool // top-level YAML keys of another program
	omit   map[string]bool // settings this command does not take
	fields []*field
	file   *string
	flags  map[string]string // flag name → raw value, in the order given
	order  []string
	given  map[string]bool // YAML paths given explicitly
}

type field struct {
	path, flag, env, help string
	old                   []string // former paths, still accepted
	section               string
	v                     reflect.Value
	def                   string
}

// NewLoader registers --config (the YAML file; env SIEVE_CONFIG) and one flag
// per setting of target, which must be a pointer to a struct holding the
// defaults, on fs. It sets fs.Usage to print every setting. The settings
// named in omit (YAML paths, e.g. "filter.force") do not apply to this
// command: they get no flag (giving one is an error), and the file and the
// environment leave them at their defaults.
func NewLoader(fs *flag.FlagSet, target any, omit ...string) *Loader {
	v := reflect.ValueOf(target)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		panic("config: NewLoader needs a pointer to a struct") // programming error
	}
	l := &Loader{target: target, flags: map[string]string{}, omit: map[string]bool{}, given: map[string]bool{}}
	for _, o := range omit {
		l.omit[o] = true
	}
	var all []*field
	walk(v.Elem(), "", "", &all)
	for _, f := range all {
		if !l.omit[f.path] {
			l.fields = append(l.fields, f)
		}
	}
	l.file = fs.String("config", "", "YAML configuration `file` (env "+EnvPrefix+"CONFIG); flags override the environment, which overrides the file")
	for _, f := range l.fields {
		fs.Var(&flagValue{l: l, f: f}, f.flag, f.help)
		for _, old := range f.old {
			fs.Var(&flagValue{l: l, f: f}, flagName(old), "former name of --"+f.flag)
		}
	}
	fs.Usage = func() {
		out := fs.Output()
		fmt.Fprintf(out, "Usage of %s:\n", fs.Name())
		l.PrintSettings(out, fs)
	}
	return l
}

func walk(v reflect.Value, prefix, section string, out *[]*field) {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		if !sf.IsExported() {
			continue
		}
		tag := sf.Tag.Get("yaml")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		fv := v.Field(i)
		if opts == "inline" {
			walk(fv, prefix, section, out)
			continue
		}
		if name == "" {
			continue
		}
		path := name
		if prefix != "" {
			path = prefix + "." + name
		}
		if fv.Kind() == reflect.Struct && fv.Type() != durationType {
			walk(fv, path, path, out)
			continue
		}
		f := &field{
			path:    path,
			flag:    flagName(path),
			env:     envName(path),
			help:    sf.Tag.Get("help"),
			section: section,
			v:       fv,
		}
		if old := sf.Tag.Get("old"); old != "" {
			for _, o := range strings.Split(old, ",") {
				if prefix != "" {
					o = prefix + "." + o
				}
				f.old = append(f.old, o)
			}
		}
		if !supported(fv) {
			panic(fmt.Sprintf("config: setting %s has unsupported type %s", path, fv.Type())) // programming error
		}
		f.def = format(fv)
		*out = append(*out, f)
	}
}

// flagName and envName are the flag and the environment variable of a
// setting's YAML path.
func flagName(path string) string { return strings.NewReplacer(".", "-", "_", "-").Replace(path) }
func envName(path string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(path, ".", "_"))
}

var (
	durationType = reflect.TypeOf(time.Duration(0))
	bytesType    = reflect.TypeOf(Bytes(0))
)

func supported(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.String, reflect.Bool, reflect.Int, reflect.Int64, reflect.Uint64, reflect.Float64:
		return true
	case reflect.Slice:
		return v.Type().Elem().Kind() == reflect.String
	}
	return false
}

func format(v reflect.Value) string {
	switch {
	case v.Type() == durationType:
		return time.Duration(v.Int()).String()
	case v.Type() == bytesType:
		return Bytes(v.Int()).String()
	}
	switch v.Kind() {
	case reflect.String:
		return v.String()
	case reflect.Bool:
		return strconv.FormatBool(v.Bool())
	case reflect.Int, reflect.Int64:
		return strconv.FormatInt(v.Int(), 10)
	case reflect.Uint64:
		return strconv.FormatUint(v.Uint(), 10)
	case reflect.Float64:
		return strconv.FormatFloat(v.Float(), 'g', -1, 64)
	case reflect.Slice:
		return strings.Join(v.Interface().([]string), ",")
	}
	return ""
}

// set parses s into the field. A []string takes a comma-separated list.
func (f *field) set(s string) error {
	v := f.v
	switch {
	case v.Type() == durationType:
		d, err := time.ParseDuration(strings.TrimSpace(s))
		if err != nil {
			return fmt.Errorf("invalid duration %q (want e.g. 250ms, 30s, 10m)", s)
		}
		v.SetInt(int64(d))
		return nil
	case v.Type() == bytesType:
		b, err := ParseBytes(s)
		if err != nil {
			return err
		}
		v.SetInt(int64(b))
		return nil
	}
	s = strings.TrimSpace(s)
	switch v.Kind() {
	case reflect.String:
		v.SetString(s)
	case reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return fmt.Errorf("invalid boolean %q (want true or false)", s)
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int64:
		n, err := strconv.ParseInt(strings.ReplaceAll(s, "_", ""), 10, 64)
		if err != nil || (v.Kind() == reflect.Int && int64(int(n)) != n) {
			return fmt.Errorf("invalid integer %q", s)
		}
		v.SetInt(n)
	case reflect.Uint64:
		n, err := strconv.ParseUint(strings.ReplaceAll(s, "_", ""), 10, 64)
		if err != nil {
			return fmt.Errorf("invalid non-negative integer %q", s)
		}
		v.SetUint(n)
	case reflect.Float64:
		x, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return fmt.Errorf("invalid number %q", s)
		}
		v.SetFloat(x)
	case reflect.Slice:
		var list []string
		for _, part := range strings.Split(s, ",") {
			if part = strings.TrimSpace(part); part != "" {
				list = append(list, part)
			}
		}
		v.Set(reflect.ValueOf(list))
	}
	return nil
}

// flagValue records a flag's raw value; Load applies it after the file and
// the environment so that flags win.
type flagValue struct {
	l *Loader
	f *field
}

func (fv *flagValue) String() string {
	if fv == nil || fv.f == nil {
		return ""
	}
	return fv.f.def
}

func (fv *flagValue) Set(s string) error {
	// Check the syntax now, so the flag package reports a bad flag at once,
	// on a scratch value of the same type.
	scratch := &field{path: fv.f.path, v: reflect.New(fv.f.v.Type()).Elem()}
	if err := scratch.set(s); err != nil {
		return err
	}
	prev, seen := fv.l.flags[fv.f.flag]
	if !seen {
		fv.l.order = append(fv.l.order, fv.f.flag)
	}
	if seen && fv.f.v.Kind() == reflect.Slice {
		s = prev + "," + s // a list flag given again adds to the list
	}
	fv.l.flags[fv.f.flag] = s
	return nil
}

// IsBoolFlag lets a bool setting be given as a bare --flag.
func (fv *flagValue) IsBoolFlag() bool { return fv.f != nil && fv.f.v.Kind() == reflect.Bool }

// Load applies the YAML file (from --config, else SIEVE_CONFIG), then every
// SIEVE_* variable that lookupEnv finds, then the flags the FlagSet parsed,
// to the target. lookupEnv is os.LookupEnv in a program, or a map lookup in
// a test. Errors are *FieldError (joined if there are several); Load does
// not validate the result.
func (l *Loader) Load(lookupEnv func(string) (string, bool)) error {
	if lookupEnv == nil {
		lookupEnv = func(string) (string, bool) { return "", false }
	}
	path := *l.file
	if path == "" {
		path, _ = lookupEnv(EnvPrefix + "CONFIG")
	}
	if path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("config: read file: %w", err)
		}
		if err := l.loadYAML(path, data); err != nil {
			return err
		}
	}
	var errs []error
	for _, f := range l.fields {
		for _, env := range append(mapSlice(f.old, envName), f.env) { // the current name wins
			if s, ok := lookupEnv(env); ok {
				if err := f.set(s); err != nil {
					errs = append(errs, &FieldError{Field: f.path, Source: "env " + env, Err: err})
				}
				l.given[f.path] = true
			}
		}
	}
	byFlag := map[string]*field{}
	for _, f := range l.fields {
		byFlag[f.flag] = f
	}
	for _, name := range l.order {
		f := byFlag[name]
		if err := f.set(l.flags[name]); err != nil {
			errs = append(errs, &FieldError{Field: f.path, Source: "flag --" + name, Err: err})
		}
		l.given[f.path] = true
	}
	setGiven(reflect.ValueOf(l.target).Elem(), "", l.given)
	return errors.Join(errs...)
}

// Given reports whether the setting at the YAML path (e.g.
// "filter.capacity") was given explicitly, in the file, the environment or
// a flag, by the last Load or LoadYAML.
func (l *Loader) Given(path string) bool { return l.given[path] }

// setGiven fills each section's "Given []string" field (yaml:"-") with the
// keys of its settings given.
func setGiven(v reflect.Value, prefix string, given map[string]bool) {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		if !sf.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(sf.Tag.Get("yaml"), ",")
		fv := v.Field(i)
		switch {
		case sf.Name == "Given" && name == "-" && fv.Type() == reflect.TypeOf([]string(nil)):
			var keys []string
			for p := range given {
				if strings.HasPrefix(p, prefix) && !strings.Contains(p[len(prefix):], ".") {
					keys = append(keys, p[len(prefix):])
				}
			}
			sort.Strings(keys)
			fv.Set(reflect.ValueOf(keys))
		case fv.Kind() == reflect.Struct && fv.Type() != durationType && name != "-":
			path := prefix
			if opts != "inline" && name != "" {
				path = prefix + name + "."
			}
			setGiven(fv, path, given)
		}
	}
}

// Skip passes over the YAML file's top-level keys named, and everything
// under them: they are another program's settings, so one file can hold
// the settings of both (see CrawlerKeys). Any other unknown key is still an
// error.
func (l *Loader) Skip(keys ...string) {
	if l.skip == nil {
		l.skip = map[string]bool{}
	}
	for _, k := range keys {
		l.skip[k] = true
	}
}

// CrawlerKeys returns the top-level YAML keys only the crawler reads; the
// dedup worker skips them.
func CrawlerKeys() []string {
	return []string{"crawl", "data_dir", "demo", "embedded", "expect_urls", "fpp", "idle_exit", "learn", "progress", "revisit_after", "revisit_granularity", "rules_from", "seed", "urlfrontier", "warc"}
}

// LoadYAML applies a YAML document to the target, as Load does with the
// config file; name is used in errors.
func (l *Loader) LoadYAML(name string, data []byte) error {
	err := l.loadYAML(name, data)
	setGiven(reflect.ValueOf(l.target).Elem(), "", l.given)
	return err
}

func (l *Loader) loadYAML(name string, data []byte) error {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("config: file %s: %w", name, err)
	}
	if len(doc.Content) == 0 { // empty file
		return nil
	}
	byPath := map[string]*field{}
	sections := map[string]bool{}
	for _, f := range l.fields {
		byPath[f.path] = f
		for _, old := range f.old {
			byPath[old] = f
		}
		for p := f.path; strings.Contains(p, "."); {
			p = p[:strings.LastIndex(p, ".")]
			sections[p] = true
		}
	}
	var errs []error
	var visit func(n *yaml.Node, prefix string)
	visit = func(n *yaml.Node, prefix string) {
		src := fmt.Sprintf("file %s line %d", name, n.Line)
		if n.Kind != yaml.MappingNode {
			errs = append(errs, &FieldError{Field: orTop(prefix), Source: src, Err: errors.New("want a mapping of settings")})
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			key, val := n.Content[i], n.Content[i+1]
			path := key.Value
			if prefix != "" {
				path = prefix + "." + key.Value
			}
			src := fmt.Sprintf("file %s line %d", name, key.Line)
			if f, ok := byPath[path]; ok {
				if err := setNode(f, val); err != nil {
					errs = append(errs, &FieldError{Field: path, Source: src, Err: err})
				}
				if val.Tag != "!!null" {
					l.given[f.path] = true
				}
				continue
			}
			if l.omit[path] { // a setting of other commands
				continue
			}
			if prefix == "" && l.skip[key.Value] {
				continue
			}
			if sections[path] {
				if val.Tag != "!!null" {
					visit(val, path)
				}
				continue
			}
			errs = append(errs, &FieldError{Field: path, Source: src, Err: errors.New("unknown setting")})
		}
	}
	visit(doc.Content[0], "")
	return errors.Join(errs...)
}

func mapSlice(in []string, f func(string) string) []string {
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = f(s)
	}
	return out
}

func orTop(p string) string {
	if p == "" {
		return "(top level)"
	}
	return p
}

func setNode(f *field, n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return nil
		}
		return f.set(n.Value)
	case yaml.SequenceNode:
		if f.v.Kind() != reflect.Slice {
			return errors.New("want a single value, got a list")
		}
		var list []string
		for _, item := range n.Content {
			if item.Kind != yaml.ScalarNode {
				return errors.New("want a list of strings")
			}
			list = append(list, item.Value)
		}
		f.v.Set(reflect.ValueOf(list))
		return nil
	}
	return errors.New("want a value, got a mapping")
}

// PrintSettings writes every setting, grouped by section, with its flag,
// environment variable, default and help, and the command's other flags.
func (l *Loader) PrintSettings(w io.Writer, fs *flag.FlagSet) {
	own := map[string]bool{"config": true}
	for _, f := range l.fields {
		own[f.flag] = true
		for _, old := range f.old {
			own[flagName(old)] = true
		}
	}
	var other []*flag.Flag
	if fs != nil {
		fs.VisitAll(func(f *flag.Flag) {
			if !own[f.Name] {
				other = append(other, f)
			}
		})
	}
	if len(other) > 0 {
		fmt.Fprintln(w, "\nCommand flags:")
		for _, f := range other {
			name, usage := flag.UnquoteUsage(f)
			fmt.Fprintf(w, "  --%s %s\n    \t%s", f.Name, name, usage)
			if f.DefValue != "" && f.DefValue != "false" {
				fmt.Fprintf(w, " (default %s)", f.DefValue)
			}
			fmt.Fprintln(w)
		}
	}
	fmt.Fprintf(w, "\nSettings: each is a flag, an environment variable, and a key in the YAML file given by\n")
	fmt.Fprintf(w, "--config FILE (env %sCONFIG). Flags override the environment, which overrides the file.\n", EnvPrefix)
	section := "\x00"
	for _, f := range l.fields {
		if f.section != section {
			section = f.section
			fmt.Fprintf(w, "\n%s:\n", orTop(section))
		}
		typ := typeName(f.v)
		fmt.Fprintf(w, "  --%s %s   (env %s, yaml %s)\n", f.flag, typ, f.env, f.path)
		help := f.help
		def := f.def
		if def == "" {
			def = `""`
		}
		fmt.Fprintf(w, "    \t%s (default %s)\n", help, def)
	}
}

func typeName(v reflect.Value) string {
	switch {
	case v.Type() == durationType:
		return "duration"
	case v.Type() == bytesType:
		return "bytes"
	}
	switch v.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "bool"
	case reflect.Int, reflect.Int64, reflect.Uint64:
		return "int"
	case reflect.Float64:
		return "float"
	case reflect.Slice:
		return "list"
	}
	return ""
}

// Lists returns the YAML paths of the list settings, sorted: each takes a
// comma-separated list, and its flag given again adds to the list.
func (l *Loader) Lists() []string {
	var out []string
	for _, f := range l.fields {
		if f.v.Kind() == reflect.Slice {
			out = append(out, f.path)
		}
	}
	sort.Strings(out)
	return out
}

// Settings returns the YAML paths of all settings, sorted; useful to
// document or check a configuration file.
func (l *Loader) Settings() []string {
	var out []string
	for _, f := range l.fields {
		out = append(out, f.path)
	}
	sort.Strings(out)
	return out
}
