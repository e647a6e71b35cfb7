// swift-tools-version:6.0
import PackageDescription

/// C libraries that only Linux needs: Apple platforms use CryptoKit instead of OpenSSL.
let linuxOnly = TargetDependencyCondition.when(platforms: [.linux])

let package = Package(
    name: "Keybound",
    platforms: [.iOS(.v16), .macOS(.v13)],
    products: [
        .library(name: "Keybound", targets: ["Keybound"]),
        .library(name: "KeyboundApple", targets: ["KeyboundApple"]),
        .library(name: "KeyboundEmulator", targets: ["KeyboundEmulator"]),
        // Real backends on Linux: TPM 2.0 keys (docs/linux.md). Empty on Apple platforms.
        .library(name: "KeyboundLinux", targets: ["KeyboundLinux"]),
        .library(name: "KeyboundServer", targets: ["KeyboundServer"]),
        // For a team's Swift services: verify Keybound's access tokens and approval receipts offline
        // (docs/oauth.md, docs/approvals.md).
        .library(name: "KeyboundVerifier", targets: ["KeyboundVerifier"]),
        .executable(name: "keybound", targets: ["keybound"]),
        .executable(name: "keybound-bench", targets: ["keybound-bench"]),
    ],
    targets: [
        // C libraries, each through one small shim header.
        .systemLibrary(
            name: "COpenSSL", pkgConfig: "libcrypto",
            providers: [.apt(["libssl-dev"]), .brew(["openssl@3"])]),
        .systemLibrary(
            name: "CSodium", pkgConfig: "libsodium",
            providers: [.apt(["libsodium-dev"]), .brew(["libsodium"])]),
        .systemLibrary(
            name: "CSQLite", pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"]), .brew(["sqlite"])]),
        .systemLibrary(
            name: "CMicroHTTPD", pkgConfig: "libmicrohttpd",
            providers: [.apt(["libmicrohttpd-dev"]), .brew(["libmicrohttpd"])]),
        .systemLibrary(
            name: "CLibPQ", pkgConfig: "libpq", providers: [.apt(["libpq-dev"]), .brew(["libpq"])]),
        // The TPM 2.0 software stack (tpm2-tss): ESAPI, the TCTI loader, marshalling, response-code
        // text. Linux only: KeyboundLinux depends on it there and nowhere else.
        .systemLibrary(name: "CTSS2", pkgConfig: "tss2-esys", providers: [.apt(["libtss2-dev"])]),
        // Linux-PAM's application interface (PAMVerifier). Linux only, as CTSS2.
        .systemLibrary(name: "CPAM", pkgConfig: "pam", providers: [.apt(["libpam0g-dev"])]),
        // libdbus-1, for the D-Bus APIs of the Secret Service (SecretServiceStore) and fprintd
        // (FprintdVerifier). Not libsecret or GDBus: GLib's pkg-config flags carry -pthread, which
        // SwiftPM warns about on every build. Linux only.
        .systemLibrary(name: "CDBus", pkgConfig: "dbus-1", providers: [.apt(["libdbus-1-dev"])]),

        // Requests, responses, problem details and signing payloads shared by server and SDK, and
        // the formats both sides read without a crypto library (DER signatures, JOSE, SHA-256).
        .target(name: "KeyboundWire"),
        // Crypto primitives: CryptoKit on Apple platforms, OpenSSL 3 elsewhere. Signature encodings
        // come from KeyboundWire, which the SDK shares.
        .target(
            name: "KeyboundCrypto",
            dependencies: ["KeyboundWire", .target(name: "COpenSSL", condition: linuxOnly)]),
        // The SDK: policies, errors, backend protocols, flows, API client. No C, no Apple framework.
        .target(name: "Keybound", dependencies: ["KeyboundWire"]),
        // Keychain, LocalAuthentication and Secure Enclave backends (files gated by canImport).
        .target(name: "KeyboundApple", dependencies: ["Keybound"]),
        // Linux backends over real components: TPMKeyVault (tss2-esys), PAMVerifier (libpam),
        // SecretServiceStore and FprintdVerifier (libdbus-1). Every file is gated by `#if os(Linux)`,
        // so on Apple platforms the module is empty and needs no C library.
        .target(
            name: "KeyboundLinux",
            dependencies: [
                "Keybound", .target(name: "KeyboundCrypto", condition: linuxOnly),
                .target(name: "CTSS2", condition: linuxOnly), .target(name: "CPAM", condition: linuxOnly),
                .target(name: "CDBus", condition: linuxOnly),
            ]),
        // The emulated Apple device: sensor, passcode, keychain semantics, secure element, and its
        // passkeys and App Attest, whose attestation objects KeyboundWebAuthn's encoder writes.
        .target(name: "KeyboundEmulator", dependencies: ["Keybound", "KeyboundCrypto", "KeyboundWebAuthn"]),
        // WebAuthn and App Attest verification: CBOR, COSE keys, attestation, the RP ceremonies.
        // OpenSSL on every platform: X.509 chains, RSA and Ed25519 have no CryptoKit twin.
        .target(name: "KeyboundWebAuthn", dependencies: ["KeyboundCrypto", "KeyboundWire", "COpenSSL"]),
        // Offline verification of what Keybound signs (ES256 JWS: access tokens, approval receipts)
        // against the issuer's JWK Set, for a team's Swift backends: no server, no C database.
        .target(name: "KeyboundVerifier", dependencies: ["KeyboundCrypto", "KeyboundWire"]),
        // The backend: HTTP, routes, services, storage. Resources/ holds the sign-in page's
        // sources, which the EmbedFiles plugin compiles in as Swift at build time, with
        // docs/openapi.yaml (one binary, no bundle).
        .target(
            name: "KeyboundServer",
            dependencies: [
                "KeyboundWire", "KeyboundCrypto", "KeyboundWebAuthn", "KeyboundVerifier", "CSodium",
                "CSQLite",
                "CMicroHTTPD", "CLibPQ",
            ],
            exclude: ["Resources"],
            plugins: ["EmbedFiles"]),
        // Writes a Swift file that holds text files in raw string literals; run by EmbedFiles.
        .executableTarget(name: "keybound-embed"),
        .plugin(name: "EmbedFiles", capability: .buildTool(), dependencies: ["keybound-embed"]),
        .executableTarget(
            name: "keybound",
            dependencies: [
                "Keybound", "KeyboundWire", "KeyboundCrypto", "KeyboundEmulator", "KeyboundServer",
                "KeyboundVerifier", "KeyboundWebAuthn",
                // `keybound demo --device linux`: the real backends, on Linux only.
                .target(name: "KeyboundLinux", condition: linuxOnly),
            ]),
        // The performance targets of docs/design.md, measured in one run against a loopback server.
        // It seeds large populations through the server's own storage and measures the raw Argon2id
        // cost through the server's password hasher (both `package` API of KeyboundServer); its
        // PostgreSQL figures run on a throwaway cluster that KeyboundTestSupport starts, as for the
        // tests.
        .executableTarget(
            name: "keybound-bench",
            dependencies: ["KeyboundServer", "KeyboundWire", "KeyboundCrypto", "KeyboundTestSupport"],
            path: "Benchmarks/keybound-bench"),

        .testTarget(
            name: "KeyboundCryptoTests", dependencies: ["KeyboundCrypto", "KeyboundWire"],
            resources: [.copy("Vectors")]),
        // KeyboundApple too: its policy → SecAccessControl and error-domain mappings are platform-neutral.
        .testTarget(name: "KeyboundTests", dependencies: ["Keybound", "KeyboundWire", "KeyboundApple"]),
        .testTarget(
            name: "KeyboundEmulatorTests",
            dependencies: [
                "KeyboundEmulator", "KeyboundCrypto", "KeyboundWebAuthn", "KeyboundWire",
                "KeyboundTestSupport",
            ]),
        .testTarget(name: "KeyboundWireTests", dependencies: ["KeyboundWire"]),
        .testTarget(
            name: "KeyboundVerifierTests",
            dependencies: ["KeyboundVerifier", "KeyboundCrypto", "KeyboundWire"]),
        .testTarget(
            name: "KeyboundWebAuthnTests",
            dependencies: ["KeyboundWebAuthn", "KeyboundCrypto", "KeyboundWire", "KeyboundTestSupport"],
            resources: [.copy("Vectors")]),
        .testTarget(
            name: "KeyboundServerTests",
            dependencies: [
                "KeyboundServer", "KeyboundWire", "KeyboundCrypto", "KeyboundWebAuthn", "KeyboundTestSupport",
                "keybound",
            ]),
        // TPMKeyVault against real swtpm instances the tests start, PAMVerifier against Linux-PAM,
        // SecretServiceStore against gnome-keyring on a private bus, FprintdVerifier against fprintd's
        // virtual reader (each skipped, with one warning, where its component is missing), and a
        // device bound with a TPM key logging in.
        .testTarget(
            name: "KeyboundLinuxTests",
            dependencies: [
                "KeyboundLinux", "Keybound", "KeyboundCrypto", "KeyboundWire", "KeyboundServer",
                "KeyboundEmulator", "KeyboundTestSupport",
            ]),
        // What several test targets share, kept out of the products' API: the `keybound` binary
        // SwiftPM built beside the test bundle, child processes, a manual clock for SDK and
        // server, `expectKeyboundError`, a software passkey authenticator and a test App Attest CA.
        .target(
            name: "KeyboundTestSupport",
            dependencies: [
                "Keybound", "KeyboundServer", "KeyboundWebAuthn", "KeyboundCrypto", "KeyboundWire",
                "KeyboundEmulator",
            ],
            path: "Tests/KeyboundTestSupport"),
        // Runs the real `keybound` binary as a subprocess; depending on it makes SwiftPM build it first.
        // The operator commands' tests use the server in process on the database the binary changed.
        .testTarget(
            name: "KeyboundCLITests",
            dependencies: [
                "keybound", "KeyboundCrypto", "KeyboundWire", "KeyboundServer", "KeyboundTestSupport",
            ]),
        // The stories of docs/design.md end to end: SDK flows on an emulated device against a real server
        // over loopback, and `keybound demo` as a subprocess (hence the dependency on `keybound`).
        .testTarget(
            name: "EndToEndTests",
            dependencies: [
                "Keybound", "KeyboundWire", "KeyboundEmulator", "KeyboundServer", "KeyboundCrypto",
                "KeyboundVerifier", "KeyboundTestSupport", "keybound",
            ]),
    ],
    swiftLanguageModes: [.v6]
)

// Coverage-guided fuzzing (docs/fuzzing.md). The harnesses exist only when KEYBOUND_FUZZ is set,
// as `make fuzz` does for a build of its own (`--scratch-path .build/fuzz`, `-sanitize=fuzzer,address`):
// `swift build` and `make test` never compile them, and they see the modules' internals (`@testable`).
if Context.environment["KEYBOUND_FUZZ"] != nil {
    package.targets += [
        // Declares libFuzzer's driver, which `-sanitize=fuzzer` links in.
        .systemLibrary(name: "CLibFuzzer", path: "Fuzz/CLibFuzzer"),
        .executableTarget(
            name: "keybound-fuzz",
            dependencies: [
                "CLibFuzzer", "Keybound", "KeyboundWire", "KeyboundCrypto", "KeyboundEmulator",
                "KeyboundServer", "KeyboundWebAuthn",
            ],
            path: "Fuzz/Harnesses"),
    ]
}
