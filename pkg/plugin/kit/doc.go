// Package kit is what every command of `kubectl litepool` shares, and nothing else: Bind,
// the one way a command runs (its Options' Complete, Validate, Run); the injected
// Factory (clients, clock); the mutation kit (--dry-run, --yes, Events and ToPrinter on
// kubectl's PrintFlags); printing, and the cells get and describe both write; the pool
// catalog, interruption and completion; the compatibility matrix flags and tables check
// and upgrade both print. Each command lives in its own package under pkg/plugin;
// the workflows they run live beside pkg/upgrade (pkg/scale, pkg/poolcreate).
package kit
