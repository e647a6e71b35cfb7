import Foundation
import KeyboundVerifier
import KeyboundWire

// What the provider publishes about itself: the metadata documents (OpenID Connect Discovery
// 1.0, RFC 8414), its JWK Set, and the files that let native apps share this site's passkeys.

extension Application {
    /// Refuses an issuer no client could use: https (or http on loopback, for development), a
    /// host, no path, query, fragment or user. RFC 8414 §3 puts the metadata of an issuer with a
    /// path at another place than OpenID Connect Discovery does; an issuer without one has both
    /// at its root. Also refuses Android apps that are not `PACKAGE:SHA256_CERT_FINGERPRINT`.
    static func checkOAuthSettings(_ configuration: Configuration) throws {
        if let issuer = configuration.issuer {
            guard let url = URLComponents(string: issuer), let scheme = url.scheme, let host = url.host,
                !host.isEmpty,
                scheme == "https"
                    || (scheme == "http" && ["localhost", "127.0.0.1", "[::1]", "::1"].contains(host)),
                url.path.isEmpty, url.query == nil, url.fragment == nil, url.user == nil,
                issuer == issuer.lowercased()
            else {
                throw ServerError(
                    .invalidConfiguration,
                    "--issuer must be https://host[:port] (http://localhost or http://127.0.0.1 for development), "
                        + "lowercase, without a path, not '\(issuer)'")
            }
        }
        for app in configuration.androidApps where AndroidApp(app) == nil {
            throw ServerError(
                .invalidConfiguration,
                "--android-app must be PACKAGE:SHA256_CERT_FINGERPRINT (com.example.app:14:6D:E9:…, 32 bytes "
                    + "in hex), not '\(app)'")
        }
    }

    /// The metadata both documents share (RFC 8414 §2; OpenID Connect Discovery 1.0 §3).
    private func providerMetadata(issuer: String) -> JSONValue {
        func url(_ path: String) -> JSONValue { .string(issuer + path) }
        func strings(_ values: [String]) -> JSONValue { .array(values.map(JSONValue.string)) }
        let clientAuthentication = ["none", "client_secret_basic", "client_secret_post", "private_key_jwt"]
        let confidentialAuthentication = Array(clientAuthentication.dropFirst())
        return .object([
            JSONMember("issuer", .string(issuer)),
            JSONMember("authorization_endpoint", url(OAuthPaths.authorize)),
            JSONMember("token_endpoint", url(OAuthPaths.token)),
            JSONMember("userinfo_endpoint", url(OAuthPaths.userinfo)),
            JSONMember("jwks_uri", url(OAuthPaths.jwks)),
            JSONMember("introspection_endpoint", url(OAuthPaths.introspect)),
            JSONMember("revocation_endpoint", url(OAuthPaths.revoke)),
            JSONMember("scopes_supported", strings(OAuthClient.standardScopes)),
            JSONMember("response_types_supported", strings(["code"])),
            JSONMember("response_modes_supported", strings(["query"])),
            JSONMember(
                "grant_types_supported", strings(["authorization_code", "refresh_token", CIBAGrant.type])),
            JSONMember("subject_types_supported", strings(["public"])),
            JSONMember("id_token_signing_alg_values_supported", strings([ES256.name])),
            JSONMember("token_endpoint_auth_methods_supported", strings(clientAuthentication)),
            JSONMember("token_endpoint_auth_signing_alg_values_supported", strings([ES256.name])),
            JSONMember("introspection_endpoint_auth_methods_supported", strings(confidentialAuthentication)),
            JSONMember("introspection_endpoint_auth_signing_alg_values_supported", strings([ES256.name])),
            JSONMember("revocation_endpoint_auth_methods_supported", strings(clientAuthentication)),
            JSONMember("revocation_endpoint_auth_signing_alg_values_supported", strings([ES256.name])),
            JSONMember("code_challenge_methods_supported", strings(["S256"])),
            JSONMember("dpop_signing_alg_values_supported", strings([ES256.name])),
            JSONMember("authorization_response_iss_parameter_supported", .bool(true)),
            // CIBA Core §4 and RFC 9396 §10.
            JSONMember("backchannel_authentication_endpoint", url(OAuthPaths.backchannelAuthentication)),
            JSONMember(
                "backchannel_token_delivery_modes_supported", strings(CIBAMode.allCases.map(\.rawValue))),
            JSONMember("backchannel_user_code_parameter_supported", .bool(false)),
            JSONMember("authorization_details_types_supported", strings([TransferAuthorizationDetails.type])),
            JSONMember(
                "claims_supported",
                strings([
                    "sub", "iss", "aud", "exp", "iat", "auth_time", "nonce", "amr", "sid",
                    "preferred_username",
                ])),
        ])
    }

    /// `GET /.well-known/openid-configuration` and `GET /.well-known/oauth-authorization-server`.
    func providerMetadataDocument(_ context: RequestContext) throws -> HTTPResponse {
        guard let issuer = configuration.issuer else { throw APIError.notFound }
        return .publicJSON(JSON.serialize(providerMetadata(issuer: issuer)), maxAge: 3600)
    }

    /// `GET /oauth/jwks`: the keys that sign, are about to, or signed tokens still alive
    /// (``publishedSigningKeys(at:)``). Cached for at most half the publish delay, so that a
    /// verifier that caches it learns a new key before the key signs.
    func jwksDocument(_ context: RequestContext) throws -> HTTPResponse {
        guard configuration.issuer != nil else { throw APIError.notFound }
        let set = try publishedKeySet(at: context.now)
        return .publicJSON(
            JSON.serialize(set.json), maxAge: max(0, min(300, configuration.keyPublishDelay / 2)),
            type: "application/jwk-set+json")
    }

    /// `GET /.well-known/apple-app-site-association`: the App IDs (``Configuration/appIDs``)
    /// that may use this site's passkeys (`webcredentials`).
    func appleAppSiteAssociation(_ context: RequestContext) throws -> HTTPResponse {
        guard !configuration.appIDs.isEmpty else { throw APIError.notFound }
        let apps = JSONValue.array(configuration.appIDs.map(JSONValue.string))
        return .publicJSON(
            JSON.serialize(.object([JSONMember("webcredentials", .object([JSONMember("apps", apps)]))])),
            maxAge: 3600)
    }

    /// `GET /.well-known/assetlinks.json`: the Android apps (``Configuration/androidApps``) that
    /// may use this site's passkeys (Digital Asset Links, `get_login_creds`), one statement per
    /// package with all its certificate fingerprints.
    func assetLinks(_ context: RequestContext) throws -> HTTPResponse {
        let apps = configuration.androidApps.compactMap(AndroidApp.init)
        guard !apps.isEmpty else { throw APIError.notFound }
        var packages: [String] = []
        var fingerprints: [String: [String]] = [:]
        for app in apps {
            if fingerprints[app.package] == nil { packages.append(app.package) }
            fingerprints[app.package, default: []].append(app.fingerprint)
        }
        let statements = packages.map { package in
            JSONValue.object([
                JSONMember("relation", .array([.string("delegate_permission/common.get_login_creds")])),
                JSONMember(
                    "target",
                    .object([
                        JSONMember("namespace", .string("android_app")),
                        JSONMember("package_name", .string(package)),
                        JSONMember(
                            "sha256_cert_fingerprints",
                            .array((fingerprints[package] ?? []).map(JSONValue.string))),
                    ])),
            ])
        }
        return .publicJSON(JSON.serialize(.array(statements)), maxAge: 3600)
    }
}

/// An Android app that may use this site's passkeys: its package and the SHA-256 fingerprint of
/// its signing certificate (`keytool -list` prints it as 32 colon-separated hex bytes).
struct AndroidApp: Hashable {
    let package: String
    /// Uppercase hex bytes separated by colons, as assetlinks.json writes it.
    let fingerprint: String
    /// The 32 bytes.
    let fingerprintBytes: Data

    /// Reads `PACKAGE:AA:BB:…`; nil when it is not one.
    init?(_ text: String) {
        guard let colon = text.firstIndex(of: ":") else { return nil }
        let package = String(text[..<colon])
        let hexBytes = text[text.index(after: colon)...].split(
            separator: ":", omittingEmptySubsequences: false)
        let segments = package.split(separator: ".", omittingEmptySubsequences: false)
        guard segments.count >= 2,
            segments.allSatisfy({ segment in
                guard let first = segment.utf8.first, Grammar.isAlphanumeric(first),
                    !(0x30...0x39).contains(first)
                else { return false }
                return segment.utf8.allSatisfy { Grammar.isAlphanumeric($0) || $0 == UInt8(ascii: "_") }
            }),
            hexBytes.count == 32, hexBytes.allSatisfy({ $0.utf8.count == 2 })
        else { return nil }
        var bytes = Data()
        for byte in hexBytes {
            guard let value = UInt8(byte, radix: 16) else { return nil }
            bytes.append(value)
        }
        self.package = package
        fingerprint = hexBytes.map { $0.uppercased() }.joined(separator: ":")
        fingerprintBytes = bytes
    }

    /// The origin Android's Credential Manager writes into a passkey ceremony's client data for
    /// this app: `android:apk-key-hash:` and the fingerprint in base64url.
    var passkeyOrigin: String { "android:apk-key-hash:" + Base64URL.encode(fingerprintBytes) }
}

extension HTTPResponse {
    /// A public document (metadata, keys), cacheable for `maxAge` seconds.
    static func publicJSON(_ body: Data, maxAge: Int, type: String = "application/json") -> HTTPResponse {
        HTTPResponse(
            status: 200, headers: ["Content-Type": type, "Cache-Control": "public, max-age=\(maxAge)"],
            body: body)
    }
}
