// Command sql runs SQL against a Postgres URL, for the demo script, so that
// it needs no psql: statements from -c or standard input run in one
// simple-protocol round trip (several statements allowed, as psql -f runs
// a file); a query's rows print one a line, columns separated by |.
//
//	go run ./internal/tools/sql URL < file.sql
//	go run ./internal/tools/sql -c "SELECT 1" URL
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

func main() {
	command := flag.String("c", "", "SQL to run; empty: read standard input")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: sql [-c SQL] POSTGRES_URL")
		os.Exit(2)
	}
	if err := run(flag.Arg(0), *command); err != nil {
		fmt.Fprintln(os.Stderr, "sql:", err)
		os.Exit(1)
	}
}

func run(url, sql string) error {
	if sql == "" {
		b, err := io.ReadAll(os.Stdin)
		if err != nil {
			return fmt.Errorf("read standard input: %w", err)
		}
		sql = string(b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgconn.Connect(ctx, url)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.Background())
	results, err := conn.Exec(ctx, sql).ReadAll()
	if err != nil {
		return err
	}
	for _, r := range results {
		for _, row := range r.Rows {
			cols := make([]string, len(row))
			for i, v := range row {
				cols[i] = string(v)
			}
			fmt.Println(strings.Join(cols, "|"))
		}
	}
	return nil
}
