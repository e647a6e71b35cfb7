#if canImport(AuthenticationServices) && !os(watchOS)
    import AuthenticationServices
    import Foundation
    import Keybound

    /// Passkeys through the system: `ASAuthorizationController` with
    /// `ASAuthorizationPlatformPublicKeyCredentialProvider` (iCloud Keychain, or a phone nearby).
    ///
    /// The system sheet verifies the user with Face ID, Touch ID or the passcode and builds
    /// `clientDataJSON` itself, with the origin `https://` and the relying party id; the app needs
    /// the Associated Domains entitlement `webcredentials:<relying party id>`. Every failure is a
    /// ``KeyboundError`` (the sheet dismissed: `userCancel`, recovery `silent`; see the
    /// `ASAuthorizationError` table in docs/apple-mapping.md).
    ///
    /// ```swift
    /// let passkeys = PlatformPasskeyAuthenticator { view.window! }
    /// let login = PasskeyLogin(client: client, authenticator: passkeys, clientID: installationID)
    /// try await login.signIn()
    /// ```
    public struct PlatformPasskeyAuthenticator: PasskeyAuthenticator {
        private let presentationAnchor: @MainActor @Sendable () -> ASPresentationAnchor
        private let preferImmediatelyAvailableCredentials: Bool

        /// - Parameters:
        ///   - preferImmediatelyAvailableCredentials: for sign-in, offer only passkeys already on
        ///     this device (no phone-nearby QR code); with none, the ceremony ends at once with
        ///     `itemNotFound` instead of showing the sheet.
        ///   - presentationAnchor: the window the sheet belongs to, asked for on the main actor.
        public init(
            preferImmediatelyAvailableCredentials: Bool = false,
            presentationAnchor: @escaping @MainActor @Sendable () -> ASPresentationAnchor
        ) {
            self.presentationAnchor = presentationAnchor
            self.preferImmediatelyAvailableCredentials = preferImmediatelyAvailableCredentials
        }

        /// Creates a passkey with the system sheet.
        ///
        /// The request's `excludedCredentialIDs` go to the system from iOS 17.4 and macOS 13.5, so
        /// it makes no second passkey of an account this device already holds one of.
        ///
        /// - Throws: ``KeyboundError/notSupported`` when the server does not offer ES256 (-7), the
        ///   only algorithm Apple's passkeys use; `duplicateItem` when the device holds an excluded
        ///   passkey (iOS 18, macOS 15: `matchedExcludedCredential`); otherwise what the sheet reports.
        /// - Important: Before iOS 17.4 and macOS 13.5 the system takes no excluded credentials;
        ///   the server still refuses a credential it already has. The iOS 17.4 path is not
        ///   compiled against an SDK that has it, nor run, in Keybound's own checks.
        public func createCredential(_ request: PasskeyRegistrationRequest) async throws
            -> PasskeyRegistration
        {
            guard request.algorithms.contains(-7) else {
                throw KeyboundError(
                    .notSupported, message: "Apple's passkeys are ES256 (-7), which was not offered")
            }
            guard case .registration(let registration) = try await perform(.registration(request)) else {
                throw KeyboundError(
                    .unexpected, message: "the sheet returned an assertion for a registration")
            }
            return registration
        }

        /// Signs the challenge with a passkey the user picks in the system sheet.
        public func getAssertion(_ request: PasskeyAssertionRequest) async throws -> PasskeyAssertion {
            guard case .assertion(let assertion) = try await perform(.assertion(request)) else {
                throw KeyboundError(
                    .unexpected, message: "the sheet returned a registration for an assertion")
            }
            return assertion
        }

        @MainActor
        private func perform(_ ceremony: AuthorizationSession.Ceremony) async throws
            -> AuthorizationSession.Outcome
        {
            let session = AuthorizationSession(
                ceremony, anchor: presentationAnchor(),
                preferImmediatelyAvailableCredentials: preferImmediatelyAvailableCredentials)
            return try await withTaskCancellationHandler {
                try await session.run()
            } onCancel: {
                Task { @MainActor in session.cancel() }
            }
        }
    }

    /// One ceremony: builds the request, runs the controller, and turns its delegate callbacks
    /// into one result for an `async` caller (a checked continuation, resumed exactly once).
    @MainActor
    private final class AuthorizationSession: NSObject {
        enum Ceremony: Sendable {
            case registration(PasskeyRegistrationRequest)
            case assertion(PasskeyAssertionRequest)
        }

        enum Outcome: Sendable {
            case registration(PasskeyRegistration)
            case assertion(PasskeyAssertion)
        }

        private let ceremony: Ceremony
        private let anchor: ASPresentationAnchor
        private let preferImmediatelyAvailableCredentials: Bool
        private var controller: ASAuthorizationController?
        private var continuation: CheckedContinuation<Outcome, any Error>?
        private var isCancelled = false

        init(_ ceremony: Ceremony, anchor: ASPresentationAnchor, preferImmediatelyAvailableCredentials: Bool)
        {
            self.ceremony = ceremony
            self.anchor = anchor
            self.preferImmediatelyAvailableCredentials = preferImmediatelyAvailableCredentials
        }

        func run() async throws -> Outcome {
            guard !isCancelled else { throw KeyboundError(.appCancel, message: "cancelled before the sheet") }
            let provider: ASAuthorizationPlatformPublicKeyCredentialProvider
            let request: ASAuthorizationRequest
            switch ceremony {
            case .registration(let options):
                provider = ASAuthorizationPlatformPublicKeyCredentialProvider(
                    relyingPartyIdentifier: options.relyingPartyID)
                let registration = provider.createCredentialRegistrationRequest(
                    challenge: options.challenge, name: options.userName, userID: options.userID)
                registration.displayName = options.userDisplayName
                registration.userVerificationPreference = Self.preference(options.userVerification)
                registration.attestationPreference = Self.attestation(options.attestation)
                Self.exclude(options.excludedCredentialIDs, from: registration)
                request = registration
            case .assertion(let options):
                provider = ASAuthorizationPlatformPublicKeyCredentialProvider(
                    relyingPartyIdentifier: options.relyingPartyID)
                let assertion = provider.createCredentialAssertionRequest(challenge: options.challenge)
                assertion.allowedCredentials = options.allowedCredentialIDs.map {
                    ASAuthorizationPlatformPublicKeyCredentialDescriptor(credentialID: $0)
                }
                assertion.userVerificationPreference = Self.preference(options.userVerification)
                request = assertion
            }
            let controller = ASAuthorizationController(authorizationRequests: [request])
            controller.delegate = self
            controller.presentationContextProvider = self
            self.controller = controller
            // The controller holds its delegate weakly: this method, suspended below, keeps the
            // session alive until a callback resumes it.
            return try await withCheckedThrowingContinuation { continuation in
                self.continuation = continuation
                if case .assertion = ceremony, preferImmediatelyAvailableCredentials {
                    controller.performRequests(options: .preferImmediatelyAvailableCredentials)
                } else {
                    controller.performRequests()
                }
            }
        }

        /// Ends the sheet early (the calling task was cancelled); the delegate then reports
        /// `canceled`, which resumes the caller.
        func cancel() {
            isCancelled = true
            controller?.cancel()
        }

        private func finish(_ result: Result<Outcome, any Error>) {
            guard let continuation else { return }
            self.continuation = nil
            controller = nil
            continuation.resume(with: result)
        }

        private func outcome(of credential: ASAuthorizationCredential) throws -> Outcome {
            switch credential {
            case let registration as ASAuthorizationPlatformPublicKeyCredentialRegistration:
                guard let attestationObject = registration.rawAttestationObject else {
                    throw KeyboundError(
                        .unexpected, message: "the new passkey came without an attestation object")
                }
                return .registration(
                    PasskeyRegistration(
                        credentialID: registration.credentialID,
                        clientDataJSON: registration.rawClientDataJSON, attestationObject: attestationObject,
                        attachment: Self.attachment(of: registration)))
            case let assertion as ASAuthorizationPlatformPublicKeyCredentialAssertion:
                return .assertion(
                    PasskeyAssertion(
                        credentialID: assertion.credentialID, clientDataJSON: assertion.rawClientDataJSON,
                        authenticatorData: assertion.rawAuthenticatorData, signature: assertion.signature,
                        userHandle: assertion.userID, attachment: Self.attachment(of: assertion))
                )
            default:
                throw KeyboundError(.unexpected, message: "the sheet returned \(type(of: credential))")
            }
        }

        /// Passes the server's `excludeCredentials` on, so the system refuses a second passkey of
        /// an account on a device that already holds one (iOS 18 and macOS 15 report
        /// `matchedExcludedCredential`, which becomes `duplicateItem`).
        ///
        /// Apple documents the property from iOS 17.4 and macOS 13.5; before, the list is dropped
        /// and only the server refuses the duplicate. The macOS 14.0 SDK declares it for macOS
        /// 13.5, and apple-sdk-check holds the guard to that. The iOS 17.0 SDK has it only through
        /// a conformance it marks unavailable on iOS, which Swift imports with no iOS version at
        /// all: the iOS 17.4 guard is Apple's documentation, not checked by any build here (the
        /// iOS 17.4 SDK of Xcode 15.3 and later enforces it), and this path has never run here.
        /// tvOS and visionOS do not have the property.
        private static func exclude(
            _ credentialIDs: [Data],
            from registration: ASAuthorizationPlatformPublicKeyCredentialRegistrationRequest
        ) {
            #if os(iOS) || os(macOS)
                guard !credentialIDs.isEmpty else { return }
                if #available(iOS 17.4, macOS 13.5, *) {
                    registration.excludedCredentials = credentialIDs.map {
                        ASAuthorizationPlatformPublicKeyCredentialDescriptor(credentialID: $0)
                    }
                }
            #endif
        }

        private static func preference(_ requirement: PasskeyUserVerification)
            -> ASAuthorizationPublicKeyCredentialUserVerificationPreference
        {
            switch requirement {
            case .required: .required
            case .preferred: .preferred
            case .discouraged: .discouraged
            }
        }

        private static func attestation(_ conveyance: String)
            -> ASAuthorizationPublicKeyCredentialAttestationKind
        {
            switch conveyance {
            case "direct": .direct
            case "indirect": .indirect
            default: .none
            }
        }

        /// `platform` or `cross-platform`; the property exists from iOS 16.6 and macOS 13.5, before
        /// which the platform provider only used this device.
        private static func attachment(
            of registration: ASAuthorizationPlatformPublicKeyCredentialRegistration
        ) -> String {
            if #available(iOS 16.6, macOS 13.5, *) { return attachment(registration.attachment) }
            return "platform"
        }

        private static func attachment(of assertion: ASAuthorizationPlatformPublicKeyCredentialAssertion)
            -> String
        {
            if #available(iOS 16.6, macOS 13.5, *) { return attachment(assertion.attachment) }
            return "platform"
        }

        @available(iOS 16.6, macOS 13.5, *)
        private static func attachment(_ attachment: ASAuthorizationPublicKeyCredentialAttachment) -> String {
            attachment == .crossPlatform ? "cross-platform" : "platform"
        }
    }

    // The controller calls its delegate and presentation provider on the main thread; the
    // `@preconcurrency` conformances check that at run time instead of trusting it.
    extension AuthorizationSession: @preconcurrency ASAuthorizationControllerDelegate {
        func authorizationController(
            controller: ASAuthorizationController, didCompleteWithAuthorization authorization: ASAuthorization
        ) {
            finish(Result { try outcome(of: authorization.credential) })
        }

        func authorizationController(
            controller: ASAuthorizationController, didCompleteWithError error: any Error
        ) {
            let native = error as NSError
            finish(
                .failure(
                    KeyboundError(
                        nativeDomain: native.domain, code: native.code, message: native.localizedDescription))
            )
        }
    }

    extension AuthorizationSession: @preconcurrency ASAuthorizationControllerPresentationContextProviding {
        func presentationAnchor(for controller: ASAuthorizationController) -> ASPresentationAnchor { anchor }
    }
#endif
