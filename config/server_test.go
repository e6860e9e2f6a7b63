package config_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sievecrawl/sieve/config"
)

func TestServerSecurityValidate(t *testing.T) {
	tls := config.ServerSecurity{TLSCert: "c.pem", TLSKey: "k.pem"}
	mtls := tls
	mtls.TLSClientCA = "ca.pem"
	tests := []struct {
		name  string
		s     config.ServerSecurity
		field string // "" when valid
		auth  bool
	}{
		{"nothing", config.ServerSecurity{}, "", false},
		{"TLS", tls, "", false},
		{"tokens without TLS", config.ServerSecurity{TokensFile: "t.csv"}, "", true},
		{"mutual TLS with roles", func() config.ServerSecurity { s := mtls; s.ClientRoles = []string{"a=read"}; return s }(), "", true},
		{"cert without key", config.ServerSecurity{TLSCert: "c.pem"}, "urlfrontier.tls_cert", false},
		{"key without cert", config.ServerSecurity{TLSKey: "k.pem"}, "urlfrontier.tls_cert", false},
		{"client CA without TLS", config.ServerSecurity{TLSClientCA: "ca.pem"}, "urlfrontier.tls_client_ca", false},
		{"required without CA", func() config.ServerSecurity { s := tls; s.TLSRequired = true; return s }(), "urlfrontier.tls_client_required", false},
		{"roles without CA", config.ServerSecurity{ClientRoles: []string{"a=read"}}, "urlfrontier.client_roles", true},
		{"bad role", func() config.ServerSecurity { s := mtls; s.ClientRoles = []string{"a=root"}; return s }(), "urlfrontier.client_roles", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.s.Validate("urlfrontier")
			if tt.s.Authenticates() != tt.auth {
				t.Errorf("Authenticates() = %v, want %v", !tt.auth, tt.auth)
			}
			if tt.field == "" {
				if err != nil {
					t.Fatalf("Validate = %v, want nil", err)
				}
				return
			}
			var fe *config.FieldError
			if !errors.As(err, &fe) || fe.Field != tt.field {
				t.Fatalf("Validate = %v, want an error of %s", err, tt.field)
			}
		})
	}
}

func TestExposure(t *testing.T) {
	tokens := config.ServerSecurity{TokensFile: "t.csv"}
	secured := config.ServerSecurity{TokensFile: "t.csv", TLSCert: "c.pem", TLSKey: "k.pem"}
	insecure := config.ServerSecurity{Insecure: true}
	tests := []struct {
		addr    string
		s       config.ServerSecurity
		err     bool
		warning string // part of the warning, "" for none
	}{
		{"127.0.0.1:7071", config.ServerSecurity{}, false, ""},
		{"[::1]:7071", config.ServerSecurity{}, false, ""},
		{"localhost:7071", config.ServerSecurity{}, false, ""},
		{"127.5.6.7:7071", config.ServerSecurity{}, false, ""}, // all of 127/8 is loopback
		{"", config.ServerSecurity{}, false, ""},               // no server
		{"0.0.0.0:7071", config.ServerSecurity{}, true, ""},
		{":7071", config.ServerSecurity{}, true, ""}, // every interface
		{"[::]:7071", config.ServerSecurity{}, true, ""},
		{"10.0.0.5:7071", config.ServerSecurity{}, true, ""},
		{"frontier.internal:7071", config.ServerSecurity{}, true, ""}, // a name may resolve anywhere
		{"0.0.0.0:7071", insecure, false, "urlfrontier.insecure is set"},
		{"0.0.0.0:7071", tokens, false, "without TLS"},
		{"0.0.0.0:7071", secured, false, ""},
		{"127.0.0.1:7071", tokens, false, ""},
	}
	for _, tt := range tests {
		warning, err := tt.s.Exposure("urlfrontier", tt.addr)
		if tt.err {
			var fe *config.FieldError
			if !errors.As(err, &fe) || fe.Field != "urlfrontier.addr" || !strings.Contains(err.Error(), "urlfrontier.insecure") {
				t.Errorf("Exposure(%q, %+v) = %v, want an error of urlfrontier.addr naming urlfrontier.insecure", tt.addr, tt.s, err)
			}
			continue
		}
		if err != nil || !strings.Contains(warning, tt.warning) || (tt.warning == "") != (warning == "") {
			t.Errorf("Exposure(%q, %+v) = %q, %v, want a warning with %q", tt.addr, tt.s, warning, err, tt.warning)
		}
	}
}

func TestHTTPExposure(t *testing.T) {
	c := config.Default()
	c.HTTP.Addr = ":8080"
	err := c.Validate()
	var fe *config.FieldError
	if !errors.As(err, &fe) || fe.Field != "http.addr" || !strings.Contains(err.Error(), "http.insecure") {
		t.Fatalf("Validate with http.addr :8080 = %v, want an error of http.addr naming http.insecure", err)
	}
	c.HTTP.Insecure = true
	if err := c.Validate(); err != nil {
		t.Fatalf("Validate with http.insecure = %v", err)
	}
	if w, _ := c.HTTP.Exposure(); !strings.Contains(w, "http.insecure is set") {
		t.Fatalf("warning = %q", w)
	}
	c.HTTP = config.HTTP{Addr: "127.0.0.1:8080"}
	if w, err := c.HTTP.Exposure(); w != "" || err != nil {
		t.Fatalf("loopback: %q, %v", w, err)
	}
}

func TestHTTPWebConfig(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// A string of bcrypt's format (cost 4), as exporter-toolkit checks.
	const hash = "$2a$04$2ZfcRpk1A3pU8ZkT7zHDBuYy/Xw0bcz9e8b8mYFz9u4X3n8R6lY8a"
	tests := []struct {
		name, file string
		field      string // the error's field, "" for none
		warning    string
	}{
		{"users", write("users.yml", "basic_auth_users:\n  reader: "+hash+"\n"), "", "without TLS"},
		{"no users", write("tls.yml", "http_server_config:\n  http2: true\n"), "http.addr", ""},
		{"unknown key", write("bad.yml", "basic_auth_user:\n  reader: x\n"), "http.web_config_file", ""},
		{"missing file", filepath.Join(dir, "none.yml"), "http.web_config_file", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := config.HTTP{Addr: ":8080", WebConfigFile: tt.file}
			warning, err := h.Exposure()
			if tt.field != "" {
				var fe *config.FieldError
				if !errors.As(err, &fe) || fe.Field != tt.field {
					t.Fatalf("Exposure = %v, want an error of %s", err, tt.field)
				}
				return
			}
			if err != nil || !strings.Contains(warning, tt.warning) {
				t.Fatalf("Exposure = %q, %v, want a warning with %q", warning, err, tt.warning)
			}
		})
	}
}

func TestHTTPTokens(t *testing.T) {
	users := filepath.Join(t.TempDir(), "web.yml")
	if err := os.WriteFile(users, []byte("basic_auth_users:\n  reader: $2a$04$2ZfcRpk1A3pU8ZkT7zHDBuYy/Xw0bcz9e8b8mYFz9u4X3n8R6lY8a\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		h       config.HTTP
		field   string
		warning string
	}{
		{"tokens beyond loopback, no TLS", config.HTTP{Addr: ":8080", TokensFile: "t.csv"}, "", "in clear"},
		{"roles beyond loopback", config.HTTP{Addr: ":8080", ClientRoles: []string{"a=read"}}, "", "in clear"},
		{"tokens on loopback", config.HTTP{Addr: "127.0.0.1:8080", TokensFile: "t.csv"}, "", ""},
		{"tokens and users", config.HTTP{Addr: "127.0.0.1:8080", TokensFile: "t.csv", WebConfigFile: users}, "", ""},
		{"users beyond loopback, no TLS", config.HTTP{Addr: ":8080", WebConfigFile: users}, "", "in clear"},
		{"bad role", config.HTTP{Addr: "127.0.0.1:8080", ClientRoles: []string{"a=root"}}, "http.client_roles", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := config.Default()
			c.HTTP = tt.h
			err := c.Validate()
			if tt.field != "" {
				var fe *config.FieldError
				if !errors.As(err, &fe) || fe.Field != tt.field {
					t.Fatalf("Validate = %v, want an error of %s", err, tt.field)
				}
				return
			}
			if err != nil {
				t.Fatalf("Validate = %v", err)
			}
			if w, _ := tt.h.Exposure(); !strings.Contains(w, tt.warning) || (w == "") != (tt.warning == "") {
				t.Fatalf("warning = %q, want %q", w, tt.warning)
			}
		})
	}
}
