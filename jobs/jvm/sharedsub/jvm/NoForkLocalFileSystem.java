package sharedsub.jvm;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.attribute.PosixFilePermission;
import java.util.EnumSet;
import java.util.Set;

import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.permission.FsPermission;

/**
 * Hadoop's local file system ({@code file:}) that sets permissions through java.nio instead of a
 * {@code chmod} child process, and writes no checksum files.
 *
 * <p>Without Hadoop's native library (pyspark does not ship it) {@link RawLocalFileSystem} runs
 * {@code chmod} for every file it creates. The fan-out's Spark checkpoint creates four files per
 * micro-batch (an offset file, a commit file and their checksums): four child processes of the
 * driver JVM, each with a thread reading its output, per micro-batch (bench/RESULTS.md, issue 31).
 *
 * <p>The checksum files ({@code .NAME.crc}) halve the files a micro-batch writes, and with them a
 * seventh of the driver JVM's CPU under load (bench/RESULTS.md, issue 43, "three cuts per
 * micro-batch"). Nothing reads them but this class's parent: a file is read unverified without one,
 * and the checksum file of a file written over is deleted (Hadoop's {@code ChecksumFileSystem}
 * when it does not write checksums), so a JVM without this class still reads what it wrote.
 *
 * <p>Contract: the same files, contents and permission bits as {@link LocalFileSystem}, without
 * checksum files. Modes with bits beyond {@code rwxrwxrwx} (sticky, setuid), and file systems
 * without POSIX attributes, are left to Hadoop's own way. jobs/session.py installs it as
 * {@code fs.file.impl} for local masters. Still a {@link LocalFileSystem}: Hadoop's
 * {@code FileSystem.getLocal} casts to one.
 */
public class NoForkLocalFileSystem extends LocalFileSystem {
    public NoForkLocalFileSystem() {
        super(new Raw());
        setWriteChecksum(false);
    }

    /** The raw (checksum-less) file system underneath, with the java.nio permission setter. */
    public static class Raw extends RawLocalFileSystem {
        private static final PosixFilePermission[] BITS = {
            PosixFilePermission.OTHERS_EXECUTE, PosixFilePermission.OTHERS_WRITE, PosixFilePermission.OTHERS_READ,
            PosixFilePermission.GROUP_EXECUTE, PosixFilePermission.GROUP_WRITE, PosixFilePermission.GROUP_READ,
            PosixFilePermission.OWNER_EXECUTE, PosixFilePermission.OWNER_WRITE, PosixFilePermission.OWNER_READ,
        };

        @Override
        public void setPermission(Path p, FsPermission permission) throws IOException {
            int mode = permission.toShort();
            if ((mode & ~0777) != 0) {
                super.setPermission(p, permission);
                return;
            }
            Set<PosixFilePermission> set = EnumSet.noneOf(PosixFilePermission.class);
            for (int bit = 0; bit < BITS.length; bit++) {
                if ((mode & (1 << bit)) != 0) {
                    set.add(BITS[bit]);
                }
            }
            try {
                Files.setPosixFilePermissions(pathToFile(p).toPath(), set);
            } catch (UnsupportedOperationException e) {
                super.setPermission(p, permission);
            }
        }
    }
}
