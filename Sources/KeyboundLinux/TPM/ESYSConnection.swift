#if os(Linux)
    internal import CTSS2
    import Foundation
    import Keybound

    /// One connection to the TPM, for one operation: the TCTI and ESAPI contexts, and every
    /// transient object and session loaded through it, flushed when the connection ends.
    ///
    /// Without a resource manager (swtpm, or `/dev/tpm0`) the TPM keeps a transient object or
    /// session until someone flushes it, and has room for only three of each: whatever this
    /// connection loads, it flushes, on success and on failure alike. Used on one thread at a time
    /// (``TPMDevice`` runs each operation on its own serial queue), so it is not `Sendable`.
    final class ESYSConnection {
        /// The TCTI configuration it was opened with, for messages.
        let tcti: String
        private var tctiContext: OpaquePointer?
        private var context: OpaquePointer
        /// Transient objects and sessions to flush, in the order they were loaded.
        private var transients: [ESYS_TR] = []

        /// Opens the TCTI (`device:/dev/tpmrm0`, `swtpm:host=…,port=…`) and an ESAPI context on it.
        /// - Throws: ``KeyboundError/notSupported`` when the TPM cannot be reached.
        init(tcti: String) throws {
            self.tcti = tcti
            var tctiContext: OpaquePointer?
            let loaded = Tss2_TctiLdr_Initialize(tcti, &tctiContext)
            guard loaded == TSS2_RC_SUCCESS, let tctiContext else {
                throw TPMResponse(loaded).error(during: .connect, tcti: tcti)
            }
            var context: OpaquePointer?
            let initialized = Esys_Initialize(&context, tctiContext, nil)
            guard initialized == TSS2_RC_SUCCESS, let context else {
                var owned: OpaquePointer? = tctiContext
                Tss2_TctiLdr_Finalize(&owned)
                throw TPMResponse(initialized).error(during: .connect, tcti: tcti)
            }
            self.tctiContext = tctiContext
            self.context = context
        }

        deinit {
            // Newest first: sessions and children before what they were made with.
            for handle in transients.reversed() { _ = Esys_FlushContext(context, handle) }
            var owned: OpaquePointer? = context
            Esys_Finalize(&owned)
            Tss2_TctiLdr_Finalize(&tctiContext)
        }

        /// Throws the Keybound error for a failed call; a lockout error says how long to wait.
        private func check(_ code: TSS2_RC, _ operation: TPMResponse.Operation) throws {
            guard code != TSS2_RC_SUCCESS else { return }
            let response = TPMResponse(code)
            throw response.error(
                during: operation, tcti: tcti,
                lockoutInterval: response.isLockout ? (try? lockoutInterval()) : nil)
        }

        // MARK: Objects

        /// The storage primary key under the owner hierarchy, from the TCG's ECC P-256 SRK
        /// template: the same key every time on this TPM (it derives from the owner seed), a
        /// different one on any other TPM, or after the TPM is cleared.
        /// - Returns: its handle, and its public point (`04 || X || Y`), which tells this TPM's
        ///   owner seed from any other.
        func createStoragePrimary() throws -> (handle: ESYS_TR, publicPoint: Data) {
            var sensitive = TPM2B_SENSITIVE_CREATE()
            var template = TPMTemplates.storagePrimary()
            var outsideInfo = TPM2B_DATA()
            var creationPCR = TPML_PCR_SELECTION()
            var handle = ESYS_TR(ESYS_TR_NONE)
            var outPublic: UnsafeMutablePointer<TPM2B_PUBLIC>?
            try check(
                Esys_CreatePrimary(
                    context, ESYS_TR(ESYS_TR_RH_OWNER), ESYS_TR(ESYS_TR_PASSWORD), ESYS_TR(ESYS_TR_NONE),
                    ESYS_TR(ESYS_TR_NONE), &sensitive, &template, &outsideInfo, &creationPCR, &handle,
                    &outPublic, nil, nil, nil),
                .createPrimary)
            transients.append(handle)
            defer { Esys_Free(outPublic) }
            guard let outPublic else { throw TPMResponse.missingOutput("TPM2_CreatePrimary") }
            return (handle, try TPMBytes.x963(outPublic.pointee.publicArea.unique.ecc))
        }

        /// Creates an object under `parent` (which needs no authorization value) and returns its
        /// blob, which only this TPM can load. `session` authorizes the parent; with the decrypt
        /// attribute set it also encrypts `authValue` on its way to the TPM.
        func create(under parent: ESYS_TR, _ template: TPM2B_PUBLIC, authValue: Data, session: ESYS_TR) throws
            -> TPMBlob
        {
            var sensitive = TPM2B_SENSITIVE_CREATE()
            try TPMBytes.set(&sensitive.sensitive.userAuth, authValue)
            var template = template
            var outsideInfo = TPM2B_DATA()
            var creationPCR = TPML_PCR_SELECTION()
            var outPrivate: UnsafeMutablePointer<TPM2B_PRIVATE>?
            var outPublic: UnsafeMutablePointer<TPM2B_PUBLIC>?
            try check(
                Esys_Create(
                    context, parent, session, ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), &sensitive,
                    &template, &outsideInfo, &creationPCR, &outPrivate, &outPublic, nil, nil, nil),
                .create)
            defer {
                Esys_Free(outPrivate)
                Esys_Free(outPublic)
            }
            guard let outPrivate, let outPublic else { throw TPMResponse.missingOutput("TPM2_Create") }
            return try TPMBlob(public: outPublic.pointee, private: outPrivate.pointee)
        }

        /// Loads a blob under `parent`. A blob made under another TPM's (or a cleared TPM's)
        /// primary fails its integrity check: ``KeyboundError/invalidated``.
        func load(_ blob: TPMBlob, under parent: ESYS_TR) throws -> ESYS_TR {
            var inPublic = try blob.publicArea()
            var inPrivate = try blob.privateArea()
            var handle = ESYS_TR(ESYS_TR_NONE)
            try check(
                Esys_Load(
                    context, parent, ESYS_TR(ESYS_TR_PASSWORD), ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE),
                    &inPrivate, &inPublic, &handle),
                .load)
            transients.append(handle)
            return handle
        }

        /// The object's name (its name algorithm, then the hash of its public area), as policies
        /// refer to it.
        func name(of handle: ESYS_TR) throws -> Data {
            var name: UnsafeMutablePointer<TPM2B_NAME>?
            try check(Esys_TR_GetName(context, handle, &name), .other)
            defer { Esys_Free(name) }
            guard let name else { throw TPMResponse.missingOutput("Esys_TR_GetName") }
            return TPMBytes.get(name.pointee.name, count: name.pointee.size)
        }

        /// The authorization value ESAPI presents (or proves by HMAC) for `handle`.
        func setAuthValue(_ authValue: Data, for handle: ESYS_TR) throws {
            var auth = TPM2B_AUTH()
            try TPMBytes.set(&auth, authValue)
            try check(Esys_TR_SetAuth(context, handle, &auth), .other)
        }

        /// Flushes a transient object or session now (to make room), instead of at the end.
        func flush(_ handle: ESYS_TR) throws {
            guard let index = transients.lastIndex(of: handle) else { return }
            transients.remove(at: index)
            try check(Esys_FlushContext(context, handle), .other)
        }

        // MARK: Sessions

        /// An HMAC session salted with `saltKey` (the storage primary): its session key comes
        /// from an ECDH exchange with that key, so an authorization value proved in it never
        /// crosses the bus, and a parameter encrypted in it (AES-128-CFB) cannot be read there.
        func startSaltedHMACSession(saltKey: ESYS_TR) throws -> ESYS_TR {
            var symmetric = TPMT_SYM_DEF()
            symmetric.algorithm = TPM2_ALG_AES
            symmetric.keyBits.aes = 128
            symmetric.mode.aes = TPM2_ALG_CFB
            var session = ESYS_TR(ESYS_TR_NONE)
            try check(
                Esys_StartAuthSession(
                    context, saltKey, ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE),
                    ESYS_TR(ESYS_TR_NONE), nil, TPM2_SE(TPM2_SE_HMAC), &symmetric, TPM2_ALG_SHA256, &session),
                .startSession)
            transients.append(session)
            return session
        }

        /// A policy session, whose digest the policy commands extend.
        func startPolicySession() throws -> ESYS_TR {
            var symmetric = TPMT_SYM_DEF()
            symmetric.algorithm = TPM2_ALG_NULL
            var session = ESYS_TR(ESYS_TR_NONE)
            try check(
                Esys_StartAuthSession(
                    context, ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE),
                    ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), nil, TPM2_SE(TPM2_SE_POLICY), &symmetric,
                    TPM2_ALG_SHA256, &session),
                .startSession)
            transients.append(session)
            return session
        }

        /// What `session` does to the parameters of the next command: encrypt the first command
        /// parameter (`decrypt`, for a secret going in) or the first response parameter
        /// (`encrypt`, for a secret coming out). The session stays open either way.
        func setParameterEncryption(_ session: ESYS_TR, commandParameter: Bool, responseParameter: Bool)
            throws
        {
            var flags = TPMA_SESSION(TPMA_SESSION_CONTINUESESSION)
            if commandParameter { flags |= TPMA_SESSION(TPMA_SESSION_DECRYPT) }
            if responseParameter { flags |= TPMA_SESSION(TPMA_SESSION_ENCRYPT) }
            try check(Esys_TRSess_SetAttributes(context, session, flags, 0xFF), .other)
        }

        /// TPM2_PolicySecret: extends `policySession` with "whoever uses this knew the
        /// authorization value of `object`", proved in `authSession`. A wrong value is
        /// `TPM_RC_AUTH_FAIL` (and counts toward the dictionary-attack lockout).
        func policySecret(_ object: ESYS_TR, policySession: ESYS_TR, authSession: ESYS_TR) throws {
            var timeout: UnsafeMutablePointer<TPM2B_TIMEOUT>?
            var ticket: UnsafeMutablePointer<TPMT_TK_AUTH>?
            try check(
                Esys_PolicySecret(
                    context, object, policySession, authSession, ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE),
                    nil, nil, nil, 0, &timeout, &ticket),
                .authorize)
            Esys_Free(timeout)
            Esys_Free(ticket)
        }

        // MARK: Keys

        /// ECDSA over the SHA-256 `digest` (32 bytes) with `key`, authorized by `session`
        /// (`ESYS_TR_PASSWORD` for a key without an authorization value).
        /// - Returns: `r || s`, 32 bytes each.
        func signECDSA(digest: Data, with key: ESYS_TR, session: ESYS_TR) throws -> Data {
            var inDigest = TPM2B_DIGEST()
            try TPMBytes.set(&inDigest, digest)
            var scheme = TPMT_SIG_SCHEME()
            scheme.scheme = TPM2_ALG_ECDSA
            scheme.details.ecdsa.hashAlg = TPM2_ALG_SHA256
            var validation = TPMT_TK_HASHCHECK()
            validation.tag = TPM2_ST_HASHCHECK
            validation.hierarchy = TPM2_RH_NULL
            var signature: UnsafeMutablePointer<TPMT_SIGNATURE>?
            try check(
                Esys_Sign(
                    context, key, session, ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), &inDigest, &scheme,
                    &validation, &signature),
                .use)
            defer { Esys_Free(signature) }
            guard let signature, signature.pointee.sigAlg == TPM2_ALG_ECDSA else {
                throw TPMResponse.missingOutput("TPM2_Sign")
            }
            let ecdsa = signature.pointee.signature.ecdsa
            return try TPMBytes.scalar(ecdsa.signatureR) + TPMBytes.scalar(ecdsa.signatureS)
        }

        /// TPM2_ECDH_KeyGen: a fresh ephemeral key pair inside the TPM, and the shared point
        /// with `key`'s public part. Needs no authorization (anyone may encrypt to a public key);
        /// `encryptSession` encrypts the shared point on its way back.
        /// - Returns: the shared point's X coordinate and the ephemeral public point `04 || X || Y`.
        func ecdhKeyGen(_ key: ESYS_TR, encryptSession: ESYS_TR) throws -> (sharedX: Data, ephemeral: Data) {
            var zPoint: UnsafeMutablePointer<TPM2B_ECC_POINT>?
            var pubPoint: UnsafeMutablePointer<TPM2B_ECC_POINT>?
            try check(
                Esys_ECDH_KeyGen(
                    context, key, encryptSession, ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), &zPoint,
                    &pubPoint),
                .encrypt)
            defer {
                Esys_Free(zPoint)
                Esys_Free(pubPoint)
            }
            guard let zPoint, let pubPoint else { throw TPMResponse.missingOutput("TPM2_ECDH_KeyGen") }
            return (try TPMBytes.scalar(zPoint.pointee.point.x), try TPMBytes.x963(pubPoint.pointee.point))
        }

        /// TPM2_ECDH_ZGen: the shared point of `key`'s private part with `point` (`04 || X || Y`),
        /// authorized by `session`; `encryptSession` encrypts it on its way back.
        /// - Returns: the shared point's X coordinate.
        func ecdhZGen(_ key: ESYS_TR, point: Data, session: ESYS_TR, encryptSession: ESYS_TR) throws -> Data {
            var inPoint = TPM2B_ECC_POINT()
            try TPMBytes.setPoint(&inPoint, x963: point)
            var outPoint: UnsafeMutablePointer<TPM2B_ECC_POINT>?
            try check(
                Esys_ECDH_ZGen(
                    context, key, session, encryptSession, ESYS_TR(ESYS_TR_NONE), &inPoint, &outPoint),
                .decrypt)
            defer { Esys_Free(outPoint) }
            guard let outPoint else { throw TPMResponse.missingOutput("TPM2_ECDH_ZGen") }
            return try TPMBytes.scalar(outPoint.pointee.point.x)
        }

        /// TPM2_ObjectChangeAuth: a new private blob for `object` with `newAuthValue`, authorized by
        /// `session` with the current value (which `session` also encrypts the new one under).
        /// The old blob keeps working with the old value: the TPM cannot revoke a copy.
        func changeAuthValue(of object: ESYS_TR, parent: ESYS_TR, to newAuthValue: Data, session: ESYS_TR)
            throws -> Data
        {
            var newAuth = TPM2B_AUTH()
            try TPMBytes.set(&newAuth, newAuthValue)
            var outPrivate: UnsafeMutablePointer<TPM2B_PRIVATE>?
            try check(
                Esys_ObjectChangeAuth(
                    context, object, parent, session, ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), &newAuth,
                    &outPrivate),
                .authorize)
            defer { Esys_Free(outPrivate) }
            guard let outPrivate else { throw TPMResponse.missingOutput("TPM2_ObjectChangeAuth") }
            return try TPMBlob.marshal(outPrivate.pointee)
        }

        // MARK: Properties

        /// TPM_PT_LOCKOUT_INTERVAL: seconds until the dictionary-attack counter drops by one,
        /// which in lockout is when the next try is allowed.
        func lockoutInterval() throws -> Int {
            var moreData = TPMI_YES_NO(0)
            var data: UnsafeMutablePointer<TPMS_CAPABILITY_DATA>?
            let code = Esys_GetCapability(
                context, ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE),
                TPM2_CAP(TPM2_CAP_TPM_PROPERTIES), UInt32(keybound_pt_lockout_interval), 1, &moreData, &data)
            defer { Esys_Free(data) }
            guard code == TSS2_RC_SUCCESS, let data else {
                throw TPMResponse.missingOutput("TPM2_GetCapability")
            }
            let properties = data.pointee.data.tpmProperties
            guard properties.count >= 1, properties.tpmProperty.0.property == keybound_pt_lockout_interval
            else {
                throw TPMResponse.missingOutput("TPM_PT_LOCKOUT_INTERVAL")
            }
            return Int(properties.tpmProperty.0.value)
        }
    }
#endif
