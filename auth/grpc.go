package auth

import (
	"context"
	"errors"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// GRPCOptions returns the grpc.ServerOptions that check every call: a
// unary and a stream interceptor that authorize the call's method (its
// full name, "/package.Service/Method") with the role roles gives it, and
// answer UNAUTHENTICATED or PERMISSION_DENIED. A method roles does not
// name is refused to everyone. A stream is checked when it opens: a token
// rotated out while it runs does not end it, the next call is refused.
func (a *Authenticator) GRPCOptions(roles map[string]Role) []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			if err := a.checkGRPC(ctx, info.FullMethod, roles); err != nil {
				return nil, err
			}
			return h(ctx, req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			if err := a.checkGRPC(ss.Context(), info.FullMethod, roles); err != nil {
				return err
			}
			return h(srv, ss)
		}),
	}
}

// checkGRPC authorizes the call of ctx, its credentials being the
// authorization metadata and the peer's verified TLS certificate.
func (a *Authenticator) checkGRPC(ctx context.Context, method string, roles map[string]Role) error {
	md, _ := metadata.FromIncomingContext(ctx)
	c := Credentials{Authorization: md.Get("authorization")}
	if p, ok := peer.FromContext(ctx); ok {
		c.Addr = p.Addr.String()
		if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok && len(ti.State.VerifiedChains) > 0 && len(ti.State.VerifiedChains[0]) > 0 {
			c.Certificate = ti.State.VerifiedChains[0][0]
		}
	}
	_, err := a.Authorize(c, method, roles[method])
	if err == nil {
		return nil
	}
	if errors.Is(err, ErrForbidden) {
		return status.Error(codes.PermissionDenied, err.Error())
	}
	return status.Error(codes.Unauthenticated, err.Error())
}
