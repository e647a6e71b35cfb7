// The Xcode app target's only source file: the screens are in KeyboundExampleUI, the logic in
// KeyboundExampleApple.
import KeyboundExampleUI

@main
@MainActor
enum Main {
    static func main() { KeyboundExampleApp.main() }
}
