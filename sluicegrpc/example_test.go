package sluicegrpc_test

import (
	"context"
	"fmt"
	"log"
	"net"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/sluicegrpc"
)

// serve starts srv on a loopback port and returns a client connection to
// it, with the client options given.
func serve(srv *grpc.Server, opts ...grpc.DialOption) *grpc.ClientConn {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	conn, err := grpc.NewClient(lis.Addr().String(),
		append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		log.Fatal(err)
	}
	return conn
}

func ExampleNewInterceptor() {
	// Each client IP may make 2 calls per minute. Simulated time makes
	// the output exact: a server leaves sluice.WithClock out.
	lim, err := sluice.NewFixedWindow(2, time.Minute, sluice.WithClock(newClock()))
	if err != nil {
		log.Fatal(err)
	}
	limit, err := sluicegrpc.NewInterceptor(lim, sluicegrpc.WithPolicyName("per-ip"))
	if err != nil {
		log.Fatal(err)
	}
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(limit.Unary), grpc.ChainStreamInterceptor(limit.Stream))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	defer srv.Stop()
	conn := serve(srv)
	defer conn.Close()
	client := healthpb.NewHealthClient(conn)

	for range 3 {
		var header metadata.MD
		_, err := client.Check(context.Background(), &healthpb.HealthCheckRequest{}, grpc.Header(&header))
		fmt.Println(status.Code(err), header.Get("ratelimit"))
		// A client reads when to retry from the status's details.
		for _, d := range status.Convert(err).Details() {
			switch d := d.(type) {
			case *errdetails.RetryInfo:
				fmt.Println("  retry in", d.GetRetryDelay().AsDuration())
			case *errdetails.QuotaFailure:
				v := d.GetViolations()[0]
				fmt.Printf("  quota %s of %d exhausted for %s\n", v.GetQuotaId(), v.GetQuotaValue(), v.GetSubject())
			}
		}
	}
	// Output:
	// OK ["per-ip";r=1;t=60]
	// OK ["per-ip";r=0;t=60]
	// ResourceExhausted ["per-ip";r=0;t=60]
	//   retry in 1m0s
	//   quota per-ip of 2 exhausted for 127.0.0.1
}

func ExampleNewPacer() {
	// A job may call the API 20 times per second: one call every 50 ms,
	// without bursts. Its client paces itself instead of being refused.
	lim, err := sluice.NewGCRA(sluice.PerSecond(20), 1)
	if err != nil {
		log.Fatal(err)
	}
	defer lim.Close()
	pacer, err := sluicegrpc.NewPacer(lim)
	if err != nil {
		log.Fatal(err)
	}
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, health.NewServer())
	defer srv.Stop()
	conn := serve(srv, grpc.WithChainUnaryInterceptor(pacer.Unary), grpc.WithChainStreamInterceptor(pacer.Stream))
	defer conn.Close()
	client := healthpb.NewHealthClient(conn)

	began := time.Now()
	for range 5 {
		if _, err := client.Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
			log.Fatal(err)
		}
	}
	// The limiter guarantees the lower bound, whatever the machine.
	fmt.Println("5 calls, the last no earlier than 200 ms after the first:", time.Since(began) >= 200*time.Millisecond)
	// Output:
	// 5 calls, the last no earlier than 200 ms after the first: true
}

func ExampleNewInterceptor_concurrency() {
	// Each client IP may have 2 calls in flight at once. A slot comes back
	// when its call ends; one whose server died comes back when its lease
	// expires, a minute after it was taken.
	lim, err := sluice.NewConcurrencyLimit(2, time.Minute)
	if err != nil {
		log.Fatal(err)
	}
	defer lim.Close()
	limit, err := sluicegrpc.NewInterceptor(lim, sluicegrpc.WithPolicyName("per-ip"))
	if err != nil {
		log.Fatal(err)
	}
	// slow stands for handlers that take a while: each call waits until
	// finish is closed.
	started, finish := make(chan struct{}, 3), make(chan struct{})
	slow := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		started <- struct{}{}
		<-finish
		return h(ctx, req)
	}
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(limit.Unary, slow), grpc.ChainStreamInterceptor(limit.Stream))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	defer srv.Stop()
	conn := serve(srv)
	defer conn.Close()
	client := healthpb.NewHealthClient(conn)
	call := func() (metadata.MD, error) {
		var header metadata.MD
		_, err := client.Check(context.Background(), &healthpb.HealthCheckRequest{}, grpc.Header(&header))
		return header, err
	}

	done := make(chan error, 2)
	for range 2 {
		go func() {
			_, err := call()
			done <- err
		}()
		<-started
	}
	// A third call while two are in flight is refused.
	header, err := call()
	fmt.Println(status.Code(err), header.Get("ratelimit-policy"), header.Get("ratelimit"))
	for _, d := range status.Convert(err).Details() {
		switch d := d.(type) {
		case *errdetails.RetryInfo:
			fmt.Println("  retry in", d.GetRetryDelay().AsDuration())
		case *errdetails.QuotaFailure:
			v := d.GetViolations()[0]
			fmt.Printf("  quota %s of %d full for %s\n", v.GetQuotaId(), v.GetQuotaValue(), v.GetSubject())
		}
	}

	close(finish)
	fmt.Println(status.Code(<-done), status.Code(<-done))
	// Their slots are free again once they have ended: a call's response
	// leaves the server after its slot is given back.
	header, err = call()
	fmt.Println(status.Code(err), header.Get("ratelimit"))
	// Output:
	// ResourceExhausted ["per-ip";q=2;qu="concurrent-requests"] ["per-ip";r=0]
	//   retry in 1s
	//   quota per-ip of 2 full for 127.0.0.1
	// OK OK
	// OK ["per-ip";r=1]
}
