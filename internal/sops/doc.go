// Package sops reads files that SOPS encrypted to age recipients: it
// decrypts them with the age identities sluice holds, checks their MAC as
// sops does, and returns their values as a flat map that can become a
// service's environment.
//
// sluice implements the format here, on filippo.io/age and the standard
// library, instead of importing SOPS's own Go module: that module links the
// AWS, GCP, Azure, Vault and PGP SDKs, which take sluice's binary from 48 MB
// to 94 MB and more than double the CPU time of its clean build. sops's own
// source is the reference for every rule below (aes/cipher.go, sops.go,
// stores/).
//
// # The format
//
// A SOPS file is a JSON, YAML or dotenv document whose values are replaced
// by ENC[AES256_GCM,data:…,iv:…,tag:…,type:…] strings, plus a "sops"
// entry (in dotenv, flattened "sops_…" lines) holding the metadata. One
// random 256-bit data key encrypts every value with AES-GCM; its
// associated data is the value's path, the keys from the top joined and
// ended by ":" ("db:password:"), so a value moved or renamed does not
// decrypt. The data key itself is age-encrypted, once per recipient, in
// sops.age[].enc.
//
// The MAC is SHA-512 over the plaintext of every value in document order
// (comments and nulls excluded; with mac_only_encrypted, only the values
// that are encrypted, after a fixed 32-byte prefix), as upper-case hex,
// stored encrypted under the data key with the lastmodified timestamp as
// associated data. A value edited, added, removed or reordered changes the
// MAC; the MAC swapped for another file's does not decrypt.
//
// # What is read
//
// The file's name picks its format as sops picks it: .json, .env, .yaml or
// .yml. unencrypted_suffix (by default "_unencrypted"), encrypted_suffix,
// unencrypted_regex, encrypted_regex and mac_only_encrypted are honoured.
// Files that use key groups (Shamir's secret sharing) or the comment
// regexes are refused with a sentence, as are files with no age recipient.
// Comments are skipped: sops encrypts them but leaves them out of the MAC.
//
// The result is flat, as sops exec-env makes it: top-level keys, with
// strings as they are and numbers and booleans as sops prints them. A
// nested object or list, a null, a key holding "=" and a key given twice
// are refused: there is no one obvious environment variable for them.
//
// Every error is one sentence that names the file and never quotes a
// value or the data key.
package sops
