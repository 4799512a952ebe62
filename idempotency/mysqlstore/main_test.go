package mysqlstore_test

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log"
	"os"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// Every test here needs the database: check it once and say what is
	// missing, rather than fail each test with a connection error. Failing
	// (not skipping) keeps CI from passing without these tests.
	if err := checkDatabase(); err != nil {
		fmt.Fprint(os.Stderr, databaseHelp(err))
		os.Exit(1)
	}
	// The chaos test kills the server under open connections; the driver
	// would log each broken one.
	_ = mysql.SetLogger(log.New(io.Discard, "", 0))
	goleak.VerifyTestMain(m)
}

// checkDatabase connects to the test database.
func checkDatabase() error {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	cfg, err := mysql.ParseDSN(dsn())
	if err != nil {
		return err
	}
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		return err
	}
	db := sql.OpenDB(connector)
	defer db.Close()
	return db.PingContext(ctx)
}

// databaseHelp says what the tests need and how to provide it.
func databaseHelp(err error) string {
	return fmt.Sprintf(`
mysqlstore tests need MariaDB 10.6 or MySQL 8.0 or later, and could not use it:

    %v

They connect to $%s, or by default to
    root@tcp(127.0.0.1:3306)/test
that is, a server on 127.0.0.1:3306 that lets root in with no password,
with a database named "test". To start MariaDB on Debian or Ubuntu:

    start-stop-daemon --start --oknodo --background --exec "$(command -v mariadbd)"
    mariadb -uroot -e 'CREATE DATABASE IF NOT EXISTS test'

or set %s to the DSN of another server. These tests fail, rather
than skip, without it. (The chaos test starts a server of its own, with
mariadb-install-db and mariadbd, in a directory and on a port it picks.)

`, err, dsnEnv, dsnEnv)
}
