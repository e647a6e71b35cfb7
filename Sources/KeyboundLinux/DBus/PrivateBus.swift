#if os(Linux)
    import Foundation

    /// What starting a throwaway D-Bus daemon beside the real backends takes: `keybound demo
    /// --device linux` and the Linux tests start one, never the machine's buses. Package API, not
    /// the SDK's.
    package enum PrivateBus {
        /// The configuration of a `dbus-daemon` of `type` (`session` or `system`) that listens on
        /// `address` (`unix:path=…`) and lets every connection own any name and see every message:
        /// a bus for one run's own programs.
        package static func configuration(type: String, listeningOn address: String) -> String {
            """
            <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
             "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
            <busconfig>
              <type>\(type)</type>
              <listen>\(address)</listen>
              <auth>EXTERNAL</auth>
              <policy context="default">
                <allow send_destination="*" eavesdrop="true"/>
                <allow eavesdrop="true"/>
                <allow own="*"/>
              </policy>
            </busconfig>
            """
        }

        /// A program on `PATH` (`/usr/bin:/bin` when it is not set), as a shell finds it.
        package static func program(_ name: String) -> URL? {
            let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
            for folder in path.split(separator: ":") {
                let candidate = URL(fileURLWithPath: String(folder)).appendingPathComponent(name)
                if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
            }
            return nil
        }
    }
#endif
