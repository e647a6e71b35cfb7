#if os(Linux)
    internal import CPAM
    import Dispatch
    import Foundation
    import Keybound

    /// One PAM transaction: `pam_start_confdir`, `pam_authenticate`, `pam_acct_mgmt`, `pam_end`,
    /// on the PAM queue, with a conversation that asks the app's closure.
    struct PAMTransaction: Sendable {
        let service: String
        let user: String
        let configurationDirectory: String?
        let prompt: VerificationPrompt
        let entry: PAMVerifier.SecretEntry

        /// Every transaction of the process runs here, one at a time: PAM modules are not all
        /// thread-safe (pam_unix calls getpwnam and crypt), and `pam_authenticate` blocks for the
        /// whole stack, the user's typing and any delay a module adds after a failure, so it must
        /// not hold a thread of Swift's cooperative pool.
        private static let queue = DispatchQueue(label: "Keybound.PAM", qos: .userInitiated)

        /// The name of the user this process runs as (its real user id), or nil.
        static func currentUserName() -> String? {
            var entry = passwd()
            var result: UnsafeMutablePointer<passwd>?
            var buffer = [CChar](repeating: 0, count: 16_384)
            guard getpwuid_r(getuid(), &entry, &buffer, buffer.count, &result) == 0, result != nil,
                let name = entry.pw_name
            else { return nil }
            return String(cString: name)
        }

        /// Runs the transaction on the PAM queue.
        /// - Throws: what the closure threw, or the mapped PAM result.
        func run() async throws {
            try await withCheckedThrowingContinuation {
                (continuation: CheckedContinuation<Void, any Error>) in
                Self.queue.async { continuation.resume(with: Result { try self.authenticate() }) }
            }
        }

        /// On the PAM queue.
        private func authenticate() throws {
            let conversation = PAMConversation(prompt: prompt, entry: entry)
            let context = Unmanaged.passRetained(conversation)
            defer { context.release() }
            var callbacks = pam_conv(conv: pamConverse, appdata_ptr: context.toOpaque())
            var handle: OpaquePointer?
            // Linux-PAM copies the conversation structure, so a pointer for the call is enough.
            var status = pam_start_confdir(service, user, &callbacks, configurationDirectory, &handle)
            guard status == PAM_SUCCESS, let handle else {
                throw mapped(status, conversation)
            }
            defer { pam_end(handle, status) }
            status = pam_authenticate(handle, 0)
            if status == PAM_SUCCESS { status = pam_acct_mgmt(handle, 0) }
            // A closure that threw (the user cancelled) decides, whatever the module made of it.
            if let thrown = conversation.thrown { throw thrown }
            guard status == PAM_SUCCESS else { throw mapped(status, conversation) }
        }

        private func mapped(_ status: Int32, _ conversation: PAMConversation) -> KeyboundError {
            PAMResult(status).error(
                service: service, configurationDirectory: configurationDirectory, user: user,
                refusedBeforeAsking: conversation.refusedBeforeAsking, notices: conversation.notices)
        }
    }

    /// What the stack said and what the app answered during one transaction. Used on the PAM
    /// queue only: the C callback runs on the thread that called `pam_authenticate`.
    final class PAMConversation {
        let prompt: VerificationPrompt
        let entry: PAMVerifier.SecretEntry
        /// The error and information messages so far.
        private(set) var notices: [String] = []
        /// Whether a question was asked.
        private(set) var asked = false
        /// Whether a module said before any question that it refuses (an error message, or
        /// pam_faillock's "The account is locked due to 3 failed logins."): its refusal does not
        /// depend on the secret.
        private(set) var refusedBeforeAsking = false
        /// What the app's closure threw.
        private(set) var thrown: (any Error)?

        init(prompt: VerificationPrompt, entry: @escaping PAMVerifier.SecretEntry) {
            self.prompt = prompt
            self.entry = entry
        }

        /// Answers `count` messages; PAM frees the answers (and overwrites each first).
        func answer(
            _ count: Int, _ messages: UnsafeMutablePointer<UnsafePointer<pam_message>?>,
            _ responses: UnsafeMutablePointer<UnsafeMutablePointer<pam_response>?>
        ) -> Int32 {
            guard
                let replies = calloc(count, MemoryLayout<pam_response>.stride)?.assumingMemoryBound(
                    to: pam_response.self)
            else { return PAM_BUF_ERR }
            func fail(_ status: Int32) -> Int32 {
                for index in 0..<count {
                    if let answer = replies[index].resp {
                        memset(answer, 0, strlen(answer))
                        free(answer)
                    }
                }
                free(replies)
                return status
            }
            for index in 0..<count {
                guard let message = messages[index]?.pointee else { return fail(PAM_CONV_ERR) }
                let text = message.msg.map { String(cString: $0) } ?? ""
                switch message.msg_style {
                case PAM_PROMPT_ECHO_OFF, PAM_PROMPT_ECHO_ON:
                    guard thrown == nil else { return fail(PAM_CONV_ERR) }
                    asked = true
                    let request = PAMVerifier.Request(
                        prompt: prompt, message: text, echo: message.msg_style == PAM_PROMPT_ECHO_ON,
                        notices: notices)
                    switch Self.ask(entry, request) {
                    case .success(let secret):
                        guard !secret.utf8.contains(0) else {
                            thrown = KeyboundError.invalidInput("a password holds no NUL character")
                            return fail(PAM_CONV_ERR)
                        }
                        guard let copy = strdup(secret) else { return fail(PAM_BUF_ERR) }
                        replies[index].resp = copy
                    case .failure(let error):
                        thrown = error
                        return fail(PAM_CONV_ERR)
                    }
                case PAM_ERROR_MSG, PAM_TEXT_INFO:
                    notices.append(text)
                    // An error before any question, or pam_faillock's information that the account
                    // is locked ("The account is locked due to 3 failed logins."; PAM's messages
                    // are in English unless the app set a locale with translations for them).
                    if !asked, message.msg_style == PAM_ERROR_MSG || text.lowercased().contains("locked") {
                        refusedBeforeAsking = true
                    }
                default:
                    // PAM_BINARY_PROMPT and styles this conversation does not know.
                    return fail(PAM_CONV_ERR)
                }
            }
            responses.pointee = replies
            return PAM_SUCCESS
        }

        /// Runs the app's async closure from the PAM thread, which waits for it: this thread is
        /// the PAM queue's, not one of the cooperative pool's, so the closure's task can run.
        private static func ask(_ entry: @escaping PAMVerifier.SecretEntry, _ request: PAMVerifier.Request)
            -> Result<String, any Error>
        {
            let done = DispatchSemaphore(value: 0)
            let answer = Mutex<Result<String, any Error>?>(nil)
            Task {
                let result: Result<String, any Error>
                do { result = .success(try await entry(request)) } catch { result = .failure(error) }
                answer.withLock { $0 = result }
                done.signal()
            }
            done.wait()
            return answer.withLock { $0 } ?? .failure(KeyboundError(.unexpected, message: "no answer"))
        }
    }

    /// PAM's conversation callback: finds the transaction's ``PAMConversation`` in `appdata_ptr`.
    private let pamConverse:
        @convention(c) (
            Int32, UnsafeMutablePointer<UnsafePointer<pam_message>?>?,
            UnsafeMutablePointer<UnsafeMutablePointer<pam_response>?>?, UnsafeMutableRawPointer?
        ) -> Int32 = { count, messages, responses, context in
            guard let messages, let responses, let context, count > 0, count <= PAM_MAX_NUM_MSG else {
                return PAM_CONV_ERR
            }
            responses.pointee = nil
            return Unmanaged<PAMConversation>.fromOpaque(context).takeUnretainedValue().answer(
                Int(count), messages, responses)
        }
#endif
