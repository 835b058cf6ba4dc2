// Command litepool-webhook serves litepool's admission rules.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "litepool-webhook: not built yet")
	os.Exit(1)
}
