import Foundation

/// The `keybound` command: serve, demo, device, administration (user, client, keys), receipts.
let rootUsage = """
    keybound — biometric login and approval: server, emulator and demo

    usage: keybound <command> [options]

    commands:
      serve     run the HTTP API server (see keybound serve --help)
      demo      run the whole story against an in-process server and an emulated device
      device    drive a persistent emulated device from the shell
      user      accounts and their devices on the server's database (user add, user devices)
      client    OAuth 2.0 / OpenID Connect clients on the server's database (client add, list, remove)
      keys      the OAuth signing keys on the server's database (keys rotate, keys list)
      receipt   check an approval's receipt offline against the issuer's JWK Set (receipt verify)
      webhook   webhook endpoints and their deliveries (webhook add, list, remove, deliveries, retry)

    options:
      --version  print the version
      --help     print this help
    """

let keyboundVersion = "0.1.0"

let arguments = Array(CommandLine.arguments.dropFirst())
let command = arguments.first ?? "--help"
let rest = Array(arguments.dropFirst())
let status: Int32
switch command {
case "serve":
    status = await ServeCommand.run(rest)
case "device":
    status = await DeviceCommand.run(rest)
case "demo":
    status = await DemoCommand.run(rest)
case "user":
    status = UserCommand.run(rest)
case "client":
    status = ClientCommand.run(rest)
case "keys":
    status = KeysCommand.run(rest)
case "receipt":
    status = ReceiptCommand.run(rest)
case "webhook":
    status = WebhookCommand.run(rest)
case "--version", "version":
    print("keybound \(keyboundVersion)")
    status = 0
case "--help", "-h", "help":
    print(rootUsage)
    status = 0
default:
    printError("keybound: unknown command '\(command)'. Try: keybound --help")
    status = 2
}
exit(status)
