//go:build inventory_unmarshal

package inventory

// Built with -tags inventory_unmarshal (bench/getpools only), list items are decoded in
// full by the generated Unmarshal, under the same streaming pager.
func init() { itemDecoder = unmarshalDecoder }
