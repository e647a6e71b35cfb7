#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A value guarded by a pthread mutex.
///
/// `@unchecked Sendable` is safe because the only stored state is the mutex (a C handle this class
/// owns: allocated and initialised in `init`, destroyed and freed in `deinit`) and the value, which
/// is only reached through `withLock` while the mutex is held. (`Synchronization.Mutex` would do,
/// but needs macOS 15 and the package supports macOS 13.)
final class Locked<Value>: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private var value: Value

    init(_ value: Value) {
        self.value = value
        mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
        let status = pthread_mutex_init(mutex, nil)
        // pthread_mutex_init fails only when out of memory or resources; nothing can continue then.
        precondition(status == 0, "pthread_mutex_init failed: \(status)")
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Runs `body` with exclusive access to the value.
    func withLock<T>(_ body: (inout Value) throws -> T) rethrows -> T {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}
