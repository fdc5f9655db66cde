// Package secrets keeps the values that services and Terraform roots are
// given without their being in Git: a database password, a provider's
// token.
//
//   - A secret has a name and a scope: global, or one source's. A unit of a
//     source sees that source's secret of a name before a global one, and
//     never another source's.
//   - Its value is any bytes, at most MaxValue, stored sealed with
//     internal/secretbox under the key that seals the sources' credentials,
//     bound to the secret's row and version, so that a sealed value copied to
//     another row or kept across a rotation does not open. Nothing stores
//     the value in the clear or a hash of it.
//   - Its version is its identity: 1 when first set, one more at each
//     rotation, and never reused, since a deleted secret keeps its row (not
//     its value) and a name set again continues its versions. What runs with
//     a secret records its Ref (row and version), never the value.
//   - Setting, rotating and deleting are receipts in the journal that name
//     the secret, its scope and its version.
//   - Every value this process sets, opens or re-seals is registered with
//     the redactor, so that no log line, error or receipt shows it.
//
// The API is write-only: List answers names, scopes, versions and who set
// them; only Resolve opens a value, for the step that delivers it.
package secrets
