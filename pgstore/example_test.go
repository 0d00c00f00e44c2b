package pgstore_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/pgstore"
)

// A monthly budget of 1,000 units per tenant, kept in PostgreSQL so that it
// survives restarts and is shared by every process of the service.
func Example() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://app@localhost/app")
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	st, err := pgstore.New(pool) // options: WithTable, WithCallerClock, WithPruneBatch
	if err != nil {
		log.Fatal(err)
	}
	if err := st.CreateSchema(ctx); err != nil { // or run st.Schema() in a migration
		log.Fatal(err)
	}
	budget, err := sluice.NewLeakyBucket(1000, sluice.Per(1000, 30*24*time.Hour), sluice.WithStore(st))
	if err != nil {
		log.Fatal(err)
	}
	d, err := budget.Allow(ctx, "tenant-42", 30.5)
	if err != nil {
		log.Fatal(err) // PostgreSQL failed: deny or allow is the caller's choice
	}
	fmt.Println(d.Allowed, d.Remaining)
}
