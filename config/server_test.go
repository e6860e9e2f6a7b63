package config_test

import (
	"errors"
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
