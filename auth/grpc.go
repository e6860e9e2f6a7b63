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
// when it opens, and, if it came with a token, again whenever the tokens
// file changes: a stream whose token was removed (or whose role no longer
// allows the call) is cancelled and ends UNAUTHENTICATED (or
// PERMISSION_DENIED).
//
// The tap runs on the connection's reading goroutine, so checking a call
// must stay cheap: tokens and certificates are, basic-auth users (bcrypt)
// are not, and gRPC has none. A server can have one tap only. The
// interceptors it returns check the calls a tap did not authorize.
func (a *Authenticator) GRPCOptions(roles map[string]Role) []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.MaxHeaderListSize(MaxMetadataBytes),
		grpc.InTapHandle(func(ctx context.Context, info *tap.Info) (context.Context, error) {
			c := &grpcCall{method: info.FullMethodName, need: roles[info.FullMethodName]}
			if a.o.Tokens != nil {
				c.changed = a.o.Tokens.Changed() // before the check: no change missed
			}
			c.creds = a.grpcCredentials(ctx, info.Header)
			if err := a.checkGRPC(c.creds, c.method, c.need); err != nil {
				return nil, err
			}
			if c.changed != nil && len(c.creds.Authorization) > 0 {
				// The stream's own context: cancelling it wakes the
				// handler's Recv and Send.
				ctx, c.cancel = context.WithCancelCause(ctx)
			}
			return context.WithValue(ctx, authorizedKey{}, c), nil
		}),
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			if authorized(ctx) == nil {
				md, _ := metadata.FromIncomingContext(ctx)
				if err := a.checkGRPC(a.grpcCredentials(ctx, md), info.FullMethod, roles[info.FullMethod]); err != nil {
					return nil, err
				}
			}
			return h(ctx, req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			ctx := ss.Context()
			c := authorized(ctx)
			if c == nil {
				md, _ := metadata.FromIncomingContext(ctx)
				if err := a.checkGRPC(a.grpcCredentials(ctx, md), info.FullMethod, roles[info.FullMethod]); err != nil {
					return err
				}
			}
			if c == nil || c.cancel == nil {
				return h(srv, ss)
			}
			wctx, stop := context.WithCancel(ctx)
			done := make(chan struct{})
			go func() { defer close(done); a.recheck(wctx, c) }()
			err := h(srv, ss)
			stop()
			<-done
			if r, ok := context.Cause(ctx).(*Refusal); ok {
				return grpcStatus(r)
			}
			return err
		}),
	}
}

// authorizedKey is the context key of the grpcCall the tap authorized.
type authorizedKey struct{}

// grpcCall is a call the tap authorized: what it asked, with what, and,
// for a call that came with a token, how to end it when the token goes.
type grpcCall struct {
	method  string
	need    Role
	creds   Credentials
	changed <-chan struct{}         // the tokens file's next change (nil: no tokens file)
	cancel  context.CancelCauseFunc // nil: nothing to recheck
}

func authorized(ctx context.Context) *grpcCall {
	c, _ := ctx.Value(authorizedKey{}).(*grpcCall)
	return c
}

// recheck authorizes the stream c again each time the tokens file
// changes, until ctx ends, and ends the stream with the refusal when its
// credentials no longer allow it (counted and logged as any).
func (a *Authenticator) recheck(ctx context.Context, c *grpcCall) {
	changed := c.changed
	for {
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
		changed = a.o.Tokens.Changed()
		if _, err := a.Authorize(c.creds, c.method, c.need); err != nil {
			// The status first: a handler blocked in Recv, woken by the
			// cancel, would have grpc end the stream CANCELLED.
			if w, ok := grpc.ServerTransportStreamFromContext(ctx).(statusWriter); ok {
				w.WriteStatus(status.Convert(grpcStatus(err)))
			}
			c.cancel(err)
			return
		}
	}
}

// statusWriter is what grpc's transport stream (the
// grpc.ServerTransportStream of a call's context) offers beyond that
// interface to end a stream with a status at once, as grpc itself does
// when a Recv or a Send fails. Without it, a stream whose token went is
// still cancelled, and may end CANCELLED.
type statusWriter interface {
	WriteStatus(*status.Status) error
}

// grpcCredentials returns a call's credentials: the authorization
// metadata of md and the verified TLS certificate of ctx's peer.
func (a *Authenticator) grpcCredentials(ctx context.Context, md metadata.MD) Credentials {
	c := Credentials{Authorization: md.Get("authorization")}
	if p, ok := peer.FromContext(ctx); ok {
		c.Addr = p.Addr.String()
		if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok && len(ti.State.VerifiedChains) > 0 && len(ti.State.VerifiedChains[0]) > 0 {
			c.Certificate = ti.State.VerifiedChains[0][0]
		}
	}
	return c
}

// checkGRPC authorizes a call of method, which needs role need, made with
// c, and answers a refusal as a gRPC status.
func (a *Authenticator) checkGRPC(c Credentials, method string, need Role) error {
	if _, err := a.Authorize(c, method, need); err != nil {
		return grpcStatus(err)
	}
	return nil
}

// grpcStatus is a refusal's gRPC status: PERMISSION_DENIED for a client
// whose role does not allow the call, UNAUTHENTICATED otherwise.
func grpcStatus(err error) error {
	if errors.Is(err, ErrForbidden) {
		return status.Error(codes.PermissionDenied, err.Error())
	}
	return status.Error(codes.Unauthenticated, err.Error())
}
