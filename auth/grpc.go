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
	"google.golang.org/grpc/tap"
)

// MaxMetadataBytes bounds a gRPC call's metadata (its HTTP/2 header list,
// uncompressed), read before the call is authorized: the authorization
// metadata and grpc's own headers take a few hundred bytes, a token at
// most MaxTokenBytes. grpc's default is 16 MiB.
const MaxMetadataBytes = 16 << 10

// GRPCOptions returns the grpc.ServerOptions that check every call before
// any of its messages is read: a tap (grpc.InTapHandle) that authorizes
// the call's method (its full name, "/package.Service/Method") with the
// role roles gives it, from its metadata and the peer's certificate, and
// answers UNAUTHENTICATED or PERMISSION_DENIED; grpc then resets the
// stream, so a refused client's messages are never decoded, whatever
// their size. The metadata read before is bounded by MaxMetadataBytes. A
// method roles does not name is refused to everyone. A stream is checked
// when it opens.
//
// The tap runs on the connection's reading goroutine, so checking a call
// must stay cheap: tokens and certificates are, basic-auth users (bcrypt)
// are not, and gRPC has none. A server can have one tap only. The
// interceptors it returns check the calls a tap did not authorize.
func (a *Authenticator) GRPCOptions(roles map[string]Role) []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.MaxHeaderListSize(MaxMetadataBytes),
		grpc.InTapHandle(func(ctx context.Context, info *tap.Info) (context.Context, error) {
			if err := a.checkGRPC(ctx, info.Header, info.FullMethodName, roles); err != nil {
				return nil, err
			}
			return context.WithValue(ctx, authorizedKey{}, true), nil
		}),
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			if !authorized(ctx) {
				md, _ := metadata.FromIncomingContext(ctx)
				if err := a.checkGRPC(ctx, md, info.FullMethod, roles); err != nil {
					return nil, err
				}
			}
			return h(ctx, req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			if ctx := ss.Context(); !authorized(ctx) {
				md, _ := metadata.FromIncomingContext(ctx)
				if err := a.checkGRPC(ctx, md, info.FullMethod, roles); err != nil {
					return err
				}
			}
			return h(srv, ss)
		}),
	}
}

// authorizedKey marks the context of a call the tap authorized.
type authorizedKey struct{}

func authorized(ctx context.Context) bool {
	ok, _ := ctx.Value(authorizedKey{}).(bool)
	return ok
}

// checkGRPC authorizes a call of method, its credentials being the
// authorization metadata of md and the verified TLS certificate of ctx's
// peer.
func (a *Authenticator) checkGRPC(ctx context.Context, md metadata.MD, method string, roles map[string]Role) error {
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
