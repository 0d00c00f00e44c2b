// Command pacedjob runs a gRPC server that limits each API key to 5 calls
// per second (a burst of 5), and two jobs that call it 15 times each: a
// greedy one that calls as fast as it can and is refused with
// ResourceExhausted and a retry delay, and a polite one whose client paces
// itself with a sluicegrpc.Pacer and is never refused.
//
//	go run ./sluicegrpc/examples/pacedjob
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/sluicegrpc"
)

func main() {
	calls := flag.Int("calls", 15, "calls each job makes")
	flag.Parse()
	if err := run(os.Stdout, *calls); err != nil {
		log.Fatal(err)
	}
}

// rate is what the server allows each API key, and what the polite job
// paces itself to.
var rate = sluice.PerSecond(5)

func run(out io.Writer, calls int) error {
	addr, stop, err := startServer()
	if err != nil {
		return err
	}
	defer stop()

	greedy, err := dial(addr)
	if err != nil {
		return err
	}
	defer greedy.Close()
	ok, refused, retry := job(healthpb.NewHealthClient(greedy), "greedy", calls)
	fmt.Fprintf(out, "greedy: %d admitted, %d refused (ResourceExhausted; first retry delay %v)\n", ok, refused, retry.Round(time.Millisecond))

	// The polite job waits on its own limiter before each call: a GCRA
	// limiter at the server's rate, with a burst of 1 so that it never
	// bunches its calls.
	pace, err := sluice.NewGCRA(rate, 1)
	if err != nil {
		return err
	}
	defer pace.Close()
	pacer, err := sluicegrpc.NewPacer(pace)
	if err != nil {
		return err
	}
	polite, err := dial(addr, grpc.WithChainUnaryInterceptor(pacer.Unary), grpc.WithChainStreamInterceptor(pacer.Stream))
	if err != nil {
		return err
	}
	defer polite.Close()
	ok, refused, _ = job(healthpb.NewHealthClient(polite), "polite", calls)
	fmt.Fprintf(out, "polite: %d admitted, %d refused\n", ok, refused)
	return nil
}

// startServer serves the health service on a loopback port, limited per
// x-api-key, and returns its address and a function that stops it.
func startServer() (addr string, stop func(), err error) {
	lim, err := sluice.NewGCRA(rate, 5)
	if err != nil {
		return "", nil, err
	}
	limit, err := sluicegrpc.NewInterceptor(lim,
		sluicegrpc.WithKey(sluicegrpc.MetadataKey("x-api-key")),
		sluicegrpc.WithPolicyName("per-key"))
	if err != nil {
		return "", nil, err
	}
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(limit.Unary), grpc.ChainStreamInterceptor(limit.Stream))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	go func() { _ = srv.Serve(lis) }()
	return lis.Addr().String(), func() { srv.Stop(); lim.Close() }, nil
}

func dial(addr string, opts ...grpc.DialOption) (*grpc.ClientConn, error) {
	return grpc.NewClient(addr, append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))...)
}

// job makes calls calls with apiKey, one after the other, and counts the
// admitted and refused ones; retry is the first refusal's retry delay.
func job(client healthpb.HealthClient, apiKey string, calls int) (ok, refused int, retry time.Duration) {
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-api-key", apiKey)
	for range calls {
		_, err := client.Check(ctx, &healthpb.HealthCheckRequest{})
		switch status.Code(err) {
		case codes.OK:
			ok++
		case codes.ResourceExhausted:
			refused++
			if retry == 0 {
				retry = retryDelay(err)
			}
		default:
			log.Printf("%s: %v", apiKey, err)
		}
	}
	return ok, refused, retry
}

// retryDelay returns the delay of a status error's RetryInfo detail.
func retryDelay(err error) time.Duration {
	for _, d := range status.Convert(err).Details() {
		if info, ok := d.(*errdetails.RetryInfo); ok {
			return info.GetRetryDelay().AsDuration()
		}
	}
	return 0
}
