// Package kit is what every command of `kubectl litepool` shares, and nothing else: the
// injected Factory (clients, clock), the mutation kit (--dry-run, --yes, Events and
// ToPrinter on kubectl's PrintFlags), printing, the pool catalog, node updates,
// interruption and completion. Each command lives in its own package under pkg/plugin;
// the workflows they run live beside pkg/upgrade (pkg/scale, pkg/poolcreate).
package kit
