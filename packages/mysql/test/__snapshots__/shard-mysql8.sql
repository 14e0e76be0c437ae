DELIMITER $$
SET @shardflake_saved_sql_mode = @@SESSION.sql_mode$$

SET SESSION sql_mode = 'STRICT_ALL_TABLES,ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION'$$

CREATE DATABASE IF NOT EXISTS `shard_5`$$

CREATE TABLE IF NOT EXISTS `shard_5`.`sf_meta` (
  `name` VARCHAR(64) NOT NULL PRIMARY KEY,
  `value` TEXT NOT NULL
) ENGINE=InnoDB$$

DROP PROCEDURE IF EXISTS `shard_5`.`sf_check_install`$$

CREATE PROCEDURE `shard_5`.`sf_check_install`()
BEGIN
  IF (SELECT `value` FROM `shard_5`.`sf_meta` WHERE `name` = 'layout_key') <> 'epoch=1314220021721;unit=1;bits=41/13/0/10;order=time,shard,worker,sequence'
     OR (SELECT `value` FROM `shard_5`.`sf_meta` WHERE `name` = 'logical_shards') <> '2000' THEN
    SIGNAL SQLSTATE 'SF002' SET MESSAGE_TEXT = 'shardflake: shard 5 was installed with another layout or logicalShards';
  END IF;
  IF (SELECT `value` FROM `shard_5`.`sf_meta` WHERE `name` = 'moved_to') IS NOT NULL THEN
    SIGNAL SQLSTATE 'SF023' SET MESSAGE_TEXT = 'shardflake: logical shard 5 moved from this server to another (sf_meta.moved_to); move it back instead';
  END IF;
END$$

CALL `shard_5`.`sf_check_install`()$$

DROP PROCEDURE `shard_5`.`sf_check_install`$$

INSERT IGNORE INTO `shard_5`.`sf_meta` (`name`, `value`) VALUES
  ('layout_key', 'epoch=1314220021721;unit=1;bits=41/13/0/10;order=time,shard,worker,sequence'),
  ('layout', '{"name":"instagram","epoch":1314220021721,"epochIso":"2011-08-24T21:07:01.721Z","timeUnitMs":1,"timeBits":41,"shardBits":13,"workerBits":0,"sequenceBits":10,"order":["time","shard","worker","sequence"],"allowSignBit":false,"capacityPerMs":1024,"timeEndsAt":"2081-04-30T12:54:37.273Z","negativeFrom":"2046-06-27T17:00:49.497Z"}'),
  ('logical_shards', '2000'),
  ('shard', '5'),
  ('dialect', 'mysql8')$$

INSERT INTO `shard_5`.`sf_meta` (`name`, `value`) VALUES ('version', '4') ON DUPLICATE KEY UPDATE `value` = VALUES(`value`)$$

CREATE TABLE IF NOT EXISTS `shard_5`.`sf_counter` (
  `k` TINYINT UNSIGNED NOT NULL PRIMARY KEY,
  `v` BIGINT UNSIGNED NOT NULL COMMENT 'next free (time << 10 | sequence)',
  `t` BIGINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'latest clock reading (time << 10): tells a clock that went back from a burst'
) ENGINE=InnoDB$$

INSERT IGNORE INTO `shard_5`.`sf_counter` (`k`, `v`, `t`) VALUES (1, 0, 0)$$

DROP FUNCTION IF EXISTS `shard_5`.`reserve_ids`$$

CREATE FUNCTION `shard_5`.`reserve_ids`(n INT) RETURNS BIGINT UNSIGNED
  NOT DETERMINISTIC MODIFIES SQL DATA
  COMMENT 'shardflake: reserves n counter values in one UPDATE, returns the first'
BEGIN
  DECLARE now_v BIGINT UNSIGNED DEFAULT GREATEST(0, FLOOR((UNIX_TIMESTAMP(SYSDATE(3)) * 1000 + COALESCE(@shardflake_clock_offset_ms, 0) - 1314220021721) / 1)) << 10;
  DECLARE current_v BIGINT UNSIGNED;
  DECLARE seen_v BIGINT UNSIGNED;
  DECLARE message VARCHAR(128);
  IF n IS NULL OR n < 1 OR n > 1000000 THEN
    SIGNAL SQLSTATE 'SF020' SET MESSAGE_TEXT = 'shardflake: n must be from 1 to 1000000';
  END IF;
  UPDATE `shard_5`.`sf_counter`
     SET `v` = LAST_INSERT_ID(GREATEST(`v`, now_v) + n), `t` = GREATEST(`t`, now_v)
   WHERE `k` = 1
     AND GREATEST(`v`, now_v) + n <= now_v + 1024000
     AND GREATEST(`v`, now_v) + n <= 1125899906842624;
  IF ROW_COUNT() = 1 THEN
    RETURN LAST_INSERT_ID() - n;
  END IF;
  SELECT `v`, `t` INTO current_v, seen_v FROM `shard_5`.`sf_counter` WHERE `k` = 1;
  IF current_v IS NULL THEN
    SIGNAL SQLSTATE 'SF022' SET MESSAGE_TEXT = 'shardflake: the counter row of shard 5 is missing';
  END IF;
  IF current_v > 1125899906842624 THEN
    SIGNAL SQLSTATE 'SF005' SET MESSAGE_TEXT = 'shardflake: logical shard 5 moved to another server (sf_meta.moved_to); update the shard map';
  END IF;
  IF GREATEST(current_v, now_v) + n > 1125899906842624 THEN
    SIGNAL SQLSTATE 'SF007' SET MESSAGE_TEXT = 'shardflake: the time field of the layout is used up';
  END IF;
  IF n > 1024000 THEN
    SIGNAL SQLSTATE 'SF006' SET MESSAGE_TEXT = 'shardflake: shard 5 makes at most 1024000 IDs within maxDriftMs 1000: ask for fewer per call';
  END IF;
  IF seen_v > now_v AND GREATEST(current_v, seen_v) + n <= seen_v + 1024000 THEN
    SET message = CONCAT('shardflake: the server clock is ', ((seen_v - now_v) >> 10) * 1,
      ' ms behind a time it showed before (shard 5)');
    SIGNAL SQLSTATE 'SF001' SET MESSAGE_TEXT = message;
  END IF;
  SET message = CONCAT('shardflake: shard 5 is ', ((GREATEST(current_v, now_v) + n - now_v) >> 10) * 1,
    ' ms ahead with this call, more than maxDriftMs 1000');
  SIGNAL SQLSTATE 'SF006' SET MESSAGE_TEXT = message;
END$$

DROP FUNCTION IF EXISTS `shard_5`.`next_id`$$

CREATE FUNCTION `shard_5`.`next_id`() RETURNS BIGINT
  NOT DETERMINISTIC MODIFIES SQL DATA
  COMMENT 'shardflake: one new ID of shard 5'
BEGIN
  DECLARE v BIGINT UNSIGNED DEFAULT `shard_5`.`reserve_ids`(1);
  RETURN CAST((((v) >> 10) << 23) | 5120 | ((v) & 1023) AS SIGNED);
END$$

DROP PROCEDURE IF EXISTS `shard_5`.`next_ids`$$

CREATE PROCEDURE `shard_5`.`next_ids`(IN n INT)
  NOT DETERMINISTIC MODIFIES SQL DATA
  COMMENT 'shardflake: n new ascending IDs of shard 5 as one result set'
BEGIN
  DECLARE first_v BIGINT UNSIGNED DEFAULT `shard_5`.`reserve_ids`(n);
  SELECT CAST((((first_v + (g.seq - 1)) >> 10) << 23) | 5120 | ((first_v + (g.seq - 1)) & 1023) AS SIGNED) AS `id`
    FROM JSON_TABLE(CONCAT('[', REPEAT('0,', n - 1), '0]'), '$[*]' COLUMNS (seq FOR ORDINALITY)) AS g ORDER BY g.seq;
END$$

DROP FUNCTION IF EXISTS `shard_5`.`shard_for_key`$$

CREATE FUNCTION `shard_5`.`shard_for_key`(shard_key TEXT CHARACTER SET utf8mb4, key_mode VARCHAR(8) CHARACTER SET utf8mb4) RETURNS INT
  DETERMINISTIC NO SQL
  COMMENT 'shardflake: the logical shard of a key, as shardForKey computes it'
BEGIN
  -- Integers of any width (ASCII digits, an optional leading '-', in key_mode 'auto') go to
  -- key mod 2000, made non-negative; any other text to 32-bit FNV-1a of its UTF-8 bytes mod 2000.
  -- DECIMAL cannot hold 1024 digits, so the modulo is taken digit by digit while
  -- scanning: r = (r * 10 + digit) mod 2000. Keys are not folded or trimmed, whatever the collation: 'ACME', 'acme' and 'acme '
  -- are three keys.
  DECLARE b LONGBLOB DEFAULT CAST(shard_key AS BINARY);
  DECLARE len INT DEFAULT LENGTH(b);
  DECLARE i INT DEFAULT 1;
  DECLARE c INT;
  DECLARE h BIGINT UNSIGNED DEFAULT 2166136261;
  DECLARE digits BOOLEAN DEFAULT TRUE;
  DECLARE r BIGINT DEFAULT 0;
  IF key_mode IS NULL OR HEX(key_mode) NOT IN ('6175746F', '68617368') THEN
    SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = 'shardflake: key_mode must be ''auto'' or ''hash''';
  END IF;
  IF shard_key IS NULL THEN
    SIGNAL SQLSTATE 'SF008' SET MESSAGE_TEXT = 'shardflake: the shard key is missing (NULL): set it before inserting';
  END IF;
  IF CHAR_LENGTH(shard_key) > 1024 THEN
    SIGNAL SQLSTATE 'SF009' SET MESSAGE_TEXT = 'shardflake: the shard key is longer than 1024 characters';
  END IF;
  IF LENGTH(REPLACE(REPLACE(REPLACE(REPLACE(REPLACE(REPLACE(REPLACE(REPLACE(REPLACE(REPLACE(REPLACE(REPLACE(REPLACE(REPLACE(REPLACE(REPLACE(REPLACE(REPLACE(REPLACE(REPLACE(REPLACE(REPLACE(REPLACE(REPLACE(REPLACE(b, X'09', ''), X'0A', ''), X'0B', ''), X'0C', ''), X'0D', ''), X'20', ''), X'C2A0', ''), X'E19A80', ''), X'E28080', ''), X'E28081', ''), X'E28082', ''), X'E28083', ''), X'E28084', ''), X'E28085', ''), X'E28086', ''), X'E28087', ''), X'E28088', ''), X'E28089', ''), X'E2808A', ''), X'E280A8', ''), X'E280A9', ''), X'E280AF', ''), X'E2819F', ''), X'E38080', ''), X'EFBBBF', '')) = 0 THEN
    SIGNAL SQLSTATE 'SF008' SET MESSAGE_TEXT = 'shardflake: the shard key is empty or only white space: set it before inserting';
  END IF;
  WHILE i <= len DO
    SET c = ASCII(SUBSTRING(b, i, 1));
    IF c = 0 THEN
      SIGNAL SQLSTATE 'SF009' SET MESSAGE_TEXT = 'shardflake: the shard key holds U+0000';
    END IF;
    IF digits AND NOT (c BETWEEN 48 AND 57 OR (c = 45 AND i = 1 AND len > 1)) THEN
      SET digits = FALSE;
    END IF;
    IF digits AND c <> 45 THEN
      SET r = (r * 10 + (c - 48)) MOD 2000;
    END IF;
    SET h = ((h ^ c) * 16777619) & 4294967295;
    SET i = i + 1;
  END WHILE;
  IF digits AND HEX(key_mode) = '6175746F' THEN
    -- A leading '-' negates the key: -r mod 2000, made non-negative.
    RETURN IF(ASCII(b) = 45, MOD(2000 - r, 2000), r);
  END IF;
  RETURN h MOD 2000;
END$$

DROP PROCEDURE IF EXISTS `shard_5`.`generate_id`$$

CREATE PROCEDURE `shard_5`.`generate_id`(IN shard_key TEXT CHARACTER SET utf8mb4, OUT id BIGINT)
  NOT DETERMINISTIC MODIFIES SQL DATA
  COMMENT 'shardflake: an ID for a row whose shard key is shard_key'
BEGIN
  -- The key arrives as text, so that NULL, '' or 'abc' cannot become 0 on the way in (a BIGINT
  -- parameter reads them as 0 under a lax sql_mode, and 0 is a key of shard 0).
  IF `shard_5`.`shard_for_key`(shard_key, 'auto') <> 5 THEN
    SIGNAL SQLSTATE 'SF021' SET MESSAGE_TEXT = 'shardflake: the shard key belongs to another logical shard: shard_for_key(key) is not 5';
  END IF;
  SET id = `shard_5`.`next_id`();
END$$

DROP FUNCTION IF EXISTS `shard_5`.`id_shard`$$

CREATE FUNCTION `shard_5`.`id_shard`(id BIGINT) RETURNS INT
  DETERMINISTIC NO SQL
RETURN (CAST(id AS UNSIGNED) >> 10) & 8191$$

DROP FUNCTION IF EXISTS `shard_5`.`id_sequence`$$

CREATE FUNCTION `shard_5`.`id_sequence`(id BIGINT) RETURNS INT
  DETERMINISTIC NO SQL
RETURN CAST(id AS UNSIGNED) & 1023$$

DROP FUNCTION IF EXISTS `shard_5`.`id_unix_ms`$$

CREATE FUNCTION `shard_5`.`id_unix_ms`(id BIGINT) RETURNS BIGINT
  DETERMINISTIC NO SQL
RETURN 1314220021721 + ((CAST(id AS UNSIGNED) >> 23) & 2199023255551) * 1$$

DROP FUNCTION IF EXISTS `shard_5`.`id_time`$$

CREATE FUNCTION `shard_5`.`id_time`(id BIGINT) RETURNS DATETIME(3)
  DETERMINISTIC NO SQL
  COMMENT 'in the session time zone'
RETURN FROM_UNIXTIME(`shard_5`.`id_unix_ms`(id) / 1000)$$

SET SESSION sql_mode = COALESCE(@shardflake_saved_sql_mode, @@GLOBAL.sql_mode)$$
DELIMITER ;
